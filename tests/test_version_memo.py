"""Values read from a Delta table and kept while its log says it has not changed: handed
out again without a Spark job, carried over the pipeline's own appends, read again after
anything else; and the state reads that use them (gold's progress, silver's newest build,
the run summary's row counts) equal to reading the tables."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
from pyspark.sql import SparkSession

from pyspark_jobs import version_memo
from pyspark_jobs.gold.change_feed import (
    Progress,
    _read_progress,
    applied_progress,
    record_progress,
)
from pyspark_jobs.gold.tables import PROGRESS_TABLE, ensure_state_tables
from pyspark_jobs.job_names import counted_jobs
from pyspark_jobs.run_summary import counts_by
from pyspark_jobs.silver import build
from pyspark_jobs.version_memo import CommitKey, memoized, own_commit

TABLE = "scratch.memo"


class Reads:
    """A count of the table's rows, and how often it was read."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.times = 0

    def __call__(self) -> int:
        self.times += 1
        return self.spark.table(TABLE).count()


@pytest.fixture
def table(spark: SparkSession, empty_lake) -> str:
    version_memo.forget_all()
    spark.sql("create database if not exists scratch")
    spark.sql(f"create or replace table {TABLE} (id bigint) using delta")
    spark.sql(f"insert into {TABLE} values (1), (2)")
    return TABLE


def test_a_value_is_handed_out_again_without_a_spark_job_until_a_commit(
    spark: SparkSession, table: str
):
    reads = Reads(spark)
    assert memoized(spark, table, "rows", reads) == 2
    with counted_jobs(spark) as jobs:
        assert memoized(spark, table, "rows", reads) == 2
    assert (reads.times, jobs()) == (1, 0)

    spark.sql(f"insert into {table} values (3)")  # another writer's commit
    assert memoized(spark, table, "rows", reads) == 3
    assert reads.times == 2


def test_an_own_append_carries_the_value_and_anything_else_drops_it(
    spark: SparkSession, table: str
):
    reads = Reads(spark)
    memoized(spark, table, "rows", reads)
    with own_commit(spark, table, "rows", lambda rows: rows + 1):
        spark.sql(f"insert into {table} values (3)")
    with counted_jobs(spark) as jobs:
        assert memoized(spark, table, "rows", reads) == 3
    assert (reads.times, jobs()) == (1, 0)
    assert spark.table(table).count() == 3

    # Another commit between the value's read and the own append: the update would miss
    # it, so the value is dropped.
    spark.sql(f"insert into {table} values (4)")
    with own_commit(spark, table, "rows", lambda rows: rows + 1):
        spark.sql(f"insert into {table} values (5)")
    assert memoized(spark, table, "rows", reads) == 5
    assert reads.times == 2

    # A write that fails drops it too.
    with pytest.raises(RuntimeError), own_commit(spark, table, "rows", lambda rows: rows + 1):
        raise RuntimeError("the write failed")
    assert memoized(spark, table, "rows", reads) == 5
    assert reads.times == 3


def test_a_value_read_while_a_commit_landed_is_not_kept(spark: SparkSession, table: str):
    # Caught up by the rows each commit adds (one here): right only from the commit the
    # value was read at.
    def catch_up(rows: int, kept_at: CommitKey, now: CommitKey) -> int:
        return rows + now.version - kept_at.version

    def read_after_another_commit() -> int:
        spark.sql(f"insert into {table} values (9)")
        return spark.table(table).count()

    assert memoized(spark, table, "rows", read_after_another_commit, catch_up) == 3
    reads = Reads(spark)
    assert memoized(spark, table, "rows", reads, catch_up) == 3
    assert reads.times == 1


def test_a_table_created_again_or_restored_from_a_copy_is_read_again(
    spark: SparkSession, table: str, tmp_path: Path
):
    reads = Reads(spark)
    memoized(spark, table, "rows", reads)
    spark.sql(f"drop table {table}")
    spark.sql(f"create table {table} (id bigint) using delta")
    spark.sql(f"insert into {table} values (7)")  # the same version, another table id
    assert memoized(spark, table, "rows", reads) == 1
    assert reads.times == 2

    # The same location, id and version, written again by another history.
    location = urlparse(spark.sql(f"describe detail {table}").first()["location"]).path
    shutil.copytree(location, tmp_path / "copy")
    spark.sql(f"insert into {table} values (8)")
    assert memoized(spark, table, "rows", reads) == 2
    shutil.rmtree(location)
    shutil.copytree(tmp_path / "copy", location)
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # type: ignore[union-attr]
    time.sleep(0.01)  # a commit file's time is in milliseconds
    spark.sql(f"insert into {table} values (8), (9)")
    assert memoized(spark, table, "rows", reads) == 3
    assert reads.times == 4


def test_row_counts_add_appended_files_from_the_log_and_count_again_after_a_delete(
    spark: SparkSession, empty_lake
):
    version_memo.forget_all()
    spark.sql("create database if not exists scratch")
    spark.sql(
        "create or replace table scratch.parts (source string, id bigint) using delta "
        # As bronze's: each append also moves the row-tracking watermark (a domain).
        "partitioned by (source) tblproperties (delta.enableRowTracking = true)"
    )
    spark.sql("insert into scratch.parts select 'a', id from range(10)")
    assert counts_by(spark, "scratch.parts", "source") == {"a": 10}

    spark.sql("insert into scratch.parts select 'b', id from range(4)")
    spark.sql("insert into scratch.parts select 'a', id from range(2)")
    with counted_jobs(spark) as jobs:
        assert counts_by(spark, "scratch.parts", "source") == {"a": 12, "b": 4}
    assert jobs() == 0

    spark.sql("delete from scratch.parts where source = 'a' and id < 5")
    with counted_jobs(spark) as jobs:
        assert counts_by(spark, "scratch.parts", "source") == {"a": 5, "b": 4}
    assert jobs() > 0
    expected = {
        r["source"]: r["count"]
        for r in spark.table("scratch.parts").groupBy("source").count().collect()
    }
    assert counts_by(spark, "scratch.parts", "source") == expected


def test_gold_progress_after_its_own_appends_is_the_tables(spark: SparkSession, empty_lake):
    version_memo.forget_all()
    ensure_state_tables(spark)
    record_progress(spark, {"a": Progress(3, 10, "s"), "b": Progress(3, 5, "s")})
    assert applied_progress(spark) == _read_progress(spark)

    # The next run's: a newer version, the same version again (a layout recorded), and an
    # older one (a rebuild's reset), which a newer row outranks.
    record_progress(spark, {"a": Progress(5, 12, "s")})
    record_progress(spark, {"a": Progress(5, 12, "t"), "c": Progress(0, 0, "s")})
    record_progress(spark, {"b": Progress(-1, 0, "s")})
    with counted_jobs(spark) as jobs:
        memoized_progress = applied_progress(spark)
    assert jobs() == 0
    assert memoized_progress == _read_progress(spark)
    assert memoized_progress["a"] == Progress(5, 12, "t")
    assert spark.table(PROGRESS_TABLE).count() == 6


def test_silvers_newest_build_after_its_own_append_is_the_tables(spark: SparkSession, empty_lake):
    version_memo.forget_all()
    spark.sql("create database if not exists silver")
    for name in build.SILVER_TABLES:
        spark.sql(f"create table {name} (id bigint) using delta")
    build._ensure_builds_table(spark)
    assert build._last_build(spark) is None
    build._record_build(spark, 4, "f1", "full")
    build._record_build(spark, 7, "f1", "incremental")
    with counted_jobs(spark) as jobs:
        newest = build._last_build(spark)
    assert jobs() == 0
    assert newest == build._read_last_build(spark)
    assert newest is not None and newest[:2] == (7, "f1")
