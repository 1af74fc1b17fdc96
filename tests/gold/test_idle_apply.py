"""A gold run with nothing new to apply (a cycle of ``run --every`` that brought nothing)
does no work for the tables it would have applied to: it asks no table's size, and the
staged run's markers are not queried again while the pending table has no new commit.
Anything staged since is seen at once."""

from __future__ import annotations

from pyspark.sql import SparkSession

from pyspark_jobs.config import Entity, Source
from pyspark_jobs.gold.apply import apply_gold
from pyspark_jobs.gold.staging import PENDING_TABLE, unfinished_run
from pyspark_jobs.job_names import counted_jobs
from tests.gold.changelog import append, change, config, create_change_log, rows

ENTITY = Entity("E", "idle", ("id",), {"id": "bigint", "v": "string"})
SOURCE = Source("idlesrc", "pr_update", (ENTITY,), landing=None)
SMALL_LINE = "gold: small tables, planned without code generation"


def test_a_run_with_nothing_new_asks_no_table_size_and_reads_no_markers(
    spark: SparkSession, empty_lake
):
    create_change_log(spark)
    append(spark, [change(SOURCE, ENTITY, {"id": 1}, "upsert", [1], row={"id": 1, "v": "a"})])
    said: list[str] = []
    (first,) = apply_gold(spark, config(SOURCE), log=said.append)
    assert first.inserted == 1
    assert SMALL_LINE in said  # a run with changes decides on its tables' sizes

    said.clear()
    (idle,) = apply_gold(spark, config(SOURCE), log=said.append)
    assert (idle.changes, idle.inserted, idle.updated, idle.deleted, idle.rows) == (0, 0, 0, 0, 1)
    assert SMALL_LINE not in said, said

    # The markers of the last staged run: read once, then kept while the pending table
    # has no commit (no Spark job), and read again after one.
    with counted_jobs(spark) as jobs:
        assert unfinished_run(spark, {ENTITY.table: 10**6}) is None
        assert jobs() == 0
    spark.sql(f"update {PENDING_TABLE} set silver_version = {10**6 + 1} where row_kind = 'marker'")
    with counted_jobs(spark) as jobs:
        resumed = unfinished_run(spark, {ENTITY.table: 10**6})
        assert resumed is not None and resumed.tables == (ENTITY.table,)
        assert jobs() > 0
    assert rows(spark, "gold.idle", ["id", "v"]) == [(1, "a")]
