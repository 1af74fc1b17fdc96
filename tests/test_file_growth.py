"""When the warm loop compacts a table: once it gained the threshold of data files since
the loop last compacted it (``pyspark_jobs/file_growth.py``)."""

from __future__ import annotations

from pyspark_jobs.file_growth import FileGrowth


def test_a_table_is_due_once_it_gained_the_threshold_of_files():
    growth = FileGrowth(threshold=3)
    assert growth.due({"silver.change_log": 2, "gold.users": 1}) == []
    assert growth.due({"silver.change_log": 3, "gold.users": 5}) == [
        "gold.users",
        "silver.change_log",
    ]
    growth.compacted("silver.change_log", 1)
    growth.compacted("gold.users", 1)
    assert growth.due({"silver.change_log": 3, "gold.users": 4}) == ["gold.users"]


def test_a_table_that_stays_at_one_file_a_partition_is_not_due_again_at_once():
    # OPTIMIZE cannot merge files of different partitions: 40 partitions keep 40 files.
    growth = FileGrowth(threshold=10)
    assert growth.due({"bronze.cdc_raw": 40}) == ["bronze.cdc_raw"]
    growth.compacted("bronze.cdc_raw", 40)
    assert growth.due({"bronze.cdc_raw": 49}) == []
    assert growth.due({"bronze.cdc_raw": 50}) == ["bronze.cdc_raw"]


def test_growth_counts_from_fewer_files_when_another_process_compacted_the_table():
    growth = FileGrowth(threshold=10)
    growth.compacted("silver.change_log", 30)
    # `lakehouse maintain` (or --maintain-every) left 2 files: 10 new ones make it due.
    assert growth.due({"silver.change_log": 2}) == []
    assert growth.due({"silver.change_log": 11}) == []
    assert growth.due({"silver.change_log": 12}) == ["silver.change_log"]
