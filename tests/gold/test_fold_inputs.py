"""What a fold reads of the gold rows: the rows of the touched keys (``fold_inputs.of_keys``)."""

from __future__ import annotations

import functools
import re

from pyspark.sql import DataFrame, SparkSession

from pyspark_jobs.gold.fold_inputs import of_keys

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
