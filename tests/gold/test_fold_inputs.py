"""What a fold reads of the gold rows: the rows of the touched keys (``fold_inputs.of_keys``),
and nothing computed for gold rows or tombstones a first run knows are empty."""

from __future__ import annotations

import functools
import re

from pyspark.sql import DataFrame, Row, SparkSession

from pyspark_jobs.empty_frames import empty_frame
from pyspark_jobs.gold.fold_inputs import of_keys
from pyspark_jobs.gold.folds.events import KEY
from pyspark_jobs.gold.images import IMAGES_SCHEMA
from pyspark_jobs.job_names import counted_jobs
from pyspark_jobs.materialize import materialized

# Three gold tables' rows as ``current_images`` gives them: one frame per table, unioned.
ROWS = {
    "a": [('{"id":"1"}', 1), ('{"id":"2"}', 2), ('{"id":"3"}', 3)],
    "b": [('{"id":"1"}', 4), ('{"id":"9"}', 5)],
    "c": [('{"id":"1"}', 6), ('{"id":"2"}', 7)],
}
# Touched keys, as a run gathers them: a key twice (new change and history), a key of no
# row, and a key of a table the run truncates.
KEYS = [
    ("a", '{"id":"1"}'),
    ("a", '{"id":"1"}'),
    ("a", '{"id":"3"}'),
    ("b", '{"id":"7"}'),
    ("b", '{"id":"9"}'),
    ("c", '{"id":"2"}'),
]


def tables_frame(spark: SparkSession) -> DataFrame:
    # Checkpointed, as gold's inputs are: the optimizer cannot fold them into constants.
    frames = [
        spark.createDataFrame(
            [(name, key, seq) for key, seq in rows],
            "table_name string, _record_key string, _seq int",
        )
        .select("_seq", "table_name", "_record_key")
        .localCheckpoint()
        for name, rows in ROWS.items()
    ]
    return functools.reduce(DataFrame.unionByName, frames)


def keys_frame(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame(KEYS, "table_name string, _record_key string").localCheckpoint()


def expected(whole_tables: tuple[str, ...]) -> list[tuple]:
    wanted = set(KEYS)
    return sorted(
        (seq, name, key)
        for name, rows in ROWS.items()
        for key, seq in rows
        if (name, key) in wanted or name in whole_tables
    )


def test_the_rows_of_the_touched_keys_once_each_and_every_row_of_a_truncated_table(
    spark: SparkSession,
):
    frame = tables_frame(spark)
    for whole_tables in ((), ("c",)):
        chosen = of_keys(frame, keys_frame(spark), whole_tables)
        assert chosen.columns == frame.columns
        assert sorted(tuple(r) for r in chosen.collect()) == expected(whole_tables)


def test_the_key_join_is_one_join_over_every_table_not_one_per_table(spark: SparkSession):
    """A semi join is pushed below the union into one join per table, each with its own
    shuffles and Spark jobs (a warm cycle's 24 tables: the rows family's inputs took 147
    jobs, 54 with one join over all)."""
    frame = tables_frame(spark)
    for whole_tables in ((), ("c",)):
        plan = of_keys(frame, keys_frame(spark), whole_tables)._jdf.queryExecution()
        joins = re.findall(r"\bJoin (?:Inner|LeftSemi)\b", plan.optimizedPlan().toString())
        assert len(joins) == 1, plan.optimizedPlan().toString()


def test_the_rows_of_an_empty_gold_cost_no_job_and_plan_the_folds_joins_away(
    spark: SparkSession,
):
    # A first run: no gold table holds a file, so ``current_images`` is an empty frame.
    keys = keys_frame(spark)
    with counted_jobs(spark) as jobs:
        current = materialized(of_keys(empty_frame(spark, IMAGES_SCHEMA), keys, ("a",)))
        assert jobs() == 0
    assert current.collect() == []
    assert current.columns == spark.createDataFrame([], IMAGES_SCHEMA).columns
    # A fold's join with the empty rows keeps the changes' side as it is, with no join.
    joined = keys.join(current, KEY, "left")
    assert "Join" not in joined._jdf.queryExecution().optimizedPlan().toString()
    assert sorted(joined.select(*KEY, "_seq").collect()) == sorted(
        Row(table_name=t, _record_key=k, _seq=None) for t, k in KEYS
    )


def test_a_frame_with_rows_is_still_materialized(spark: SparkSession):
    frame = materialized(of_keys(tables_frame(spark), keys_frame(spark)))
    # Computed once: its plan is a checkpoint's, no longer the join.
    assert "Join" not in frame._jdf.queryExecution().optimizedPlan().toString()
    assert sorted(tuple(r) for r in frame.collect()) == expected(())
