"""``read_tables``: small tables come back read (materialized on the pool, their jobs in the
caller's job group), large ones lazy with their snapshot loaded; the rows are the table's
either way. ``load_snapshots``: what a MERGE would load first, loaded ahead."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.catalog import lookups_kept
from pyspark_jobs.delta_log import table_bytes
from pyspark_jobs.job_names import counted_jobs, named_jobs
from pyspark_jobs.small_inputs import THRESHOLD_KEY
from pyspark_jobs.snapshots import load_snapshots, read_tables
from tests.support.metastore import hive_client_calls


@pytest.fixture
def two_tables(spark: SparkSession, empty_lake) -> Iterator[tuple[str, str]]:
    spark.sql("create database if not exists scratch")
    for name, count in (("scratch.few", 3), ("scratch.more", 2000)):
        spark.sql(f"drop table if exists {name}")
        table = spark.range(count).selectExpr("id", "id * 2 as twice").coalesce(1)
        table.write.format("delta").saveAsTable(name)
    yield "scratch.few", "scratch.more"
    spark.conf.unset(THRESHOLD_KEY)


def reads_a_table(frame: DataFrame) -> bool:
    """Whether running ``frame`` still scans a table (a materialized frame reads its
    checkpoint: a LogicalRDD)."""
    plan = frame._jdf.queryExecution().optimizedPlan().toString()
    return "Relation" in plan and "LogicalRDD" not in plan


def rows(frame: DataFrame) -> list[tuple[int, int]]:
    return sorted((r["id"], r["odd"]) for r in frame.collect())


def only_odd(table: DataFrame) -> DataFrame:
    return table.select("id", (F.col("twice") + 1).alias("odd"))


def test_small_tables_are_read_on_the_pool_and_large_ones_left_lazy(
    spark: SparkSession, two_tables: tuple[str, str]
):
    few, more = two_tables
    few_bytes, more_bytes = table_bytes(spark, few), table_bytes(spark, more)
    assert few_bytes is not None and more_bytes is not None and few_bytes < more_bytes
    # Between the two sizes: ``few`` is small, ``more`` is not.
    spark.conf.set(THRESHOLD_KEY, str(few_bytes))
    group = "test_snapshots: read tables"
    spark.sparkContext.setJobGroup(group, group)
    try:
        read = read_tables(spark, {few: only_odd, more: only_odd})
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert list(read) == [few, more]
    assert not reads_a_table(read[few])
    assert reads_a_table(read[more])
    # The pool's jobs (the small table's read, the large one's snapshot load) ran in the
    # caller's job group, so they carry its step name too.
    assert spark.sparkContext.statusTracker().getJobIdsForGroup(group)
    assert rows(read[few]) == [(i, 2 * i + 1) for i in range(3)]
    assert rows(read[more]) == [(i, 2 * i + 1) for i in range(2000)]


@pytest.mark.parametrize("threshold", ["0", "1"])
def test_a_threshold_of_0_or_below_every_size_reads_nothing_ahead(
    spark: SparkSession, two_tables: tuple[str, str], threshold: str
):
    spark.conf.set(THRESHOLD_KEY, threshold)
    read = read_tables(spark, dict.fromkeys(two_tables, only_odd))
    assert all(reads_a_table(frame) for frame in read.values())
    assert rows(read[two_tables[0]]) == [(i, 2 * i + 1) for i in range(3)]


def test_under_the_default_threshold_every_small_table_is_read_ahead(
    spark: SparkSession, two_tables: tuple[str, str]
):
    read = read_tables(spark, dict.fromkeys(two_tables, only_odd))
    assert not any(reads_a_table(frame) for frame in read.values())
    assert rows(read[two_tables[1]]) == [(i, 2 * i + 1) for i in range(2000)]


def test_each_read_on_the_pool_has_its_own_copy_of_the_callers_properties(
    spark: SparkSession, two_tables: tuple[str, str]
):
    # Both reads run side by side (the barrier), each names its jobs, then looks again:
    # with one copy shared by the pool's calls (``inheritable_thread_target``), the later
    # name was both calls' and Delta's operations stacked their names on one another's.
    context = spark.sparkContext
    meeting = threading.Barrier(len(two_tables), timeout=120)
    seen: dict[str, tuple[str | None, str | None]] = {}

    def own_name(name: str) -> Callable[[DataFrame], DataFrame]:
        def read(table: DataFrame) -> DataFrame:
            first = context.getLocalProperty("spark.job.description")
            context.setJobDescription(f"reading {name}")
            meeting.wait()
            seen[name] = (first, context.getLocalProperty("spark.job.description"))
            return table

        return read

    with named_jobs(spark, "test: the caller's step"):
        read = read_tables(spark, {name: own_name(name) for name in two_tables})
        assert context.getLocalProperty("spark.job.description") == "test: the caller's step"
    assert seen == {name: ("test: the caller's step", f"reading {name}") for name in two_tables}
    assert rows(only_odd(read[two_tables[0]])) == [(i, 2 * i + 1) for i in range(3)]


def merge_one_row(spark: SparkSession, name: str) -> None:
    spark.sql(
        f"merge into {name} t using (select 1 as id, 7 as twice) s on t.id = s.id "
        "when matched then update set * when not matched then insert *"
    )


def test_a_loaded_snapshot_leaves_the_merge_less_to_do(
    spark: SparkSession, two_tables: tuple[str, str]
):
    """After a commit, the load runs the state reconstruction the MERGE would otherwise
    run itself; within a run, a second load asks the metastore nothing."""
    few, _ = two_tables
    spark.sql(f"insert into {few} values (10, 20)")
    with counted_jobs(spark) as unloaded:
        merge_one_row(spark, few)

    spark.sql(f"insert into {few} values (11, 22)")
    with counted_jobs(spark) as loading:
        load_snapshots(spark, [few])
    with counted_jobs(spark) as loaded:
        merge_one_row(spark, few)
    assert loading() > 0
    assert loaded() == unloaded() - loading()

    with lookups_kept():
        load_snapshots(spark, [few])
        calls = hive_client_calls(spark)
        load_snapshots(spark, [few])
        assert hive_client_calls(spark) == calls
