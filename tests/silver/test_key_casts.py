"""Silver's key type check casts as gold does: the dbt macro against gold's cast_value."""

from __future__ import annotations

import itertools

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.gold.typed_values import cast_value
from tests.support.dbt_macros import macro_sql

TYPES = [
    "string",
    "json",
    "boolean",
    "tinyint",
    "smallint",
    "int",
    "bigint",
    "float",
    "double",
    "date",
    "timestamp",
    "decimal(10,2)",
    "decimal(6,2)",
    "decimal(5,0)",
    "decimal( 4 , 1 )",
    "decimal(38,0)",
    "decimal(38,10)",
    "decimal(3,3)",
]
VALUES = [
    *("12", " 12 ", "12.0", "+5", "-0", "00012", "0x10", "1_000", "1d", "1f", "", "abc"),
    *("1e3", "1E3", "1e-50", "1e99", "1.e2", "1e", "e5", "-", ".", ".5", "1.", "1.2.3"),
    *("1.5", "123.456", "1234.456", "9999.994", "9999.995", "-9999.995", "99999.994"),
    *("-0.005", "0.0005", "NaN", "Infinity", "-Infinity", "true", "t", "no"),
    *("2024-01-01", "2024-02-30", "2024-01-01T10:00:00Z", "2024-01-01 10:00:00.123"),
    *("1700000000000", "-1700000000000", "9223372036854775", "-9223372036854775"),
    "9223372036854775808",
    "12345678901234567890123456789012345678",
    "123456789012345678901234567890123456789",
    "1e37",
    "1e38",
]
# Epoch milliseconds whose microseconds overflow a long: gold's timestamp_millis fails on
# them (an error, not a null), so they are compared apart: silver rejects them.
OVERFLOWING_MILLIS = ("9223372036854775807", "-9223372036854775808", "9223372036854776")


def castable_sql(text: str, declared_type: str) -> str:
    """The macro rendered as dbt renders it, over two column names."""
    return macro_sql("castable_to_declared_type", text, declared_type)


def test_the_key_cast_check_agrees_with_gold_on_every_type(spark: SparkSession):
    grid = spark.createDataFrame(list(itertools.product(VALUES, TYPES)), "v string, t string")
    gold = F.lit(None)
    for typ in TYPES:
        gold = F.when(F.col("t") == typ, cast_value(F.col("v"), typ).isNotNull()).otherwise(gold)

    rows = grid.select(
        "v", "t", F.expr(castable_sql("v", "t")).alias("silver"), gold.alias("gold")
    ).collect()

    assert [tuple(r) for r in rows if r["silver"] is not r["gold"]] == []
    # both outcomes occur for the types with rules of their own
    for typ in ("bigint", "timestamp", "decimal(6,2)", "date", "boolean"):
        assert {r["silver"] for r in rows if r["t"] == typ} == {True, False}, typ


def test_epoch_millis_out_of_timestamp_range_are_not_timestamps(spark: SparkSession):
    frame = spark.createDataFrame([(v,) for v in OVERFLOWING_MILLIS], "v string")
    row = frame.select(
        F.collect_list(F.expr(castable_sql("v", "'timestamp'"))).alias("timestamp"),
        F.collect_list(F.expr(castable_sql("v", "'string'"))).alias("string"),
    ).first()

    assert row is not None
    assert row["timestamp"] == [False, False, False]
    assert row["string"] == [True, True, True]
