"""TigerGraph attribute ops on single values: every op and value kind, as one DataFrame."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.gold.tigergraph_ops import apply_op, category
from tests.support.lambda_plans import repeated_parses

# (op, old, value, category, existed) -> expected value text
CASES = [
    ("Overwrite", "5", "7", "int", True, "7"),
    ("Add", "5", "7", "int", True, "12"),
    ("Add", None, "7", "int", True, "7"),
    ("Add", "1.5", "2.25", "real", True, "3.75"),
    ("Add", "ab", "cd", "text", True, "abcd"),
    ("Add", '["i1"]', '["i2","m2"]', "json", True, '["i1","i2","m2"]'),
    ("Add", "[1,2]", "[3]", "json", True, "[1,2,3]"),
    ("Add", None, '["i1","m2"]', "json", True, '["i1","m2"]'),
    ("Add", '{"a":"x"}', '{"b":"y"}', "json", True, '{"a":"x","b":"y"}'),
    ("Add", '{"a":1}', '{"a":2,"b":3}', "json", True, '{"a":2,"b":3}'),
    ("Add", "5", "oops", "int", True, "oops"),
    ("Max", "5", "7", "int", True, "7"),
    ("Max", "9", "7", "int", True, "9"),
    ("Max", "10", "9", "int", True, "10"),  # numeric, not text, comparison
    ("Max", "2001-01-01 08:00:00", "2000-01-01 00:00:00", "text", True, "2001-01-01 08:00:00"),
    ("Max", None, "-3", "int", True, "-3"),
    ("Min", "5", "7", "int", True, "5"),
    ("Min", "2.5", "-1.0", "real", True, "-1.0"),
    ("And", "true", "false", "bool", True, "false"),
    ("And", "true", "true", "bool", True, "true"),
    ("Or", "false", "true", "bool", True, "true"),
    ("Or", "false", "false", "bool", True, "false"),
    ("IgnoreIfExisted", "5", "7", "int", True, "5"),
    ("IgnoreIfExisted", None, "7", "int", False, "7"),
    ("Minus", "5", "7", "int", True, "-2"),
    ("Minus", None, "7", "int", True, "-7"),
    ("Minus", '["a","b","a","c"]', '["a"]', "json", True, '["b","c"]'),
    ("Minus", "[1,2,3]", "[2]", "json", True, "[1,3]"),
    ("Minus", '{"a":"x","b":"y"}', '["a"]', "json", True, '{"b":"y"}'),
    (
        "ReplaceOrAdd",
        '{"2011-10-20":"old","k":"v"}',
        '{"2011-10-20":"i: 2, s: m2"}',
        "json",
        True,
        '{"2011-10-20":"i: 2, s: m2","k":"v"}',
    ),
    ("ReplaceOrAdd", None, '{"2011-10-20":"x"}', "json", True, '{"2011-10-20":"x"}'),
    ("ReplaceOrAdd", "abc", "xyz", "text", True, "xyz"),
]


def test_every_op_on_every_value_kind(spark: SparkSession):
    frame = spark.createDataFrame(
        [c[:5] for c in CASES], "op string, old string, val string, cat string, existed boolean"
    )
    got = frame.select(
        "op",
        "old",
        "val",
        apply_op(F.col("op"), F.col("old"), F.col("val"), F.col("cat"), F.col("existed")).alias(
            "new"
        ),
    ).collect()
    assert [tuple(r) for r in got] == [(op, old, val, want) for op, old, val, _, _, want in CASES]


def test_a_minus_parses_the_removed_items_once_not_once_an_item(spark: SparkSession):
    frame = spark.createDataFrame(
        [("Minus", "[1,2,3]", "[2]"), ("Minus", '{"a":"x","b":"y"}', '["a"]')],
        "op string, old string, val string",
    )
    applied = frame.select(
        apply_op(F.col("op"), F.col("old"), F.col("val"), F.lit("json"), F.lit(True)).alias("new")
    )

    assert repeated_parses(applied) == []
    assert [r["new"] for r in applied.collect()] == ["[1,3]", '{"b":"y"}']


def test_declared_types_map_to_categories():
    assert [
        category(t)
        for t in (
            "bigint",
            "int",
            "double",
            "decimal(10,2)",
            "boolean",
            "json",
            "string",
            "timestamp",
        )
    ] == ["int", "int", "real", "real", "bool", "json", "text", "text"]
