"""``project_image``, which every fold family builds its images with: its values, and
that it parses a row's image once, not once per declared column."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.gold.folds.rows import row_states
from pyspark_jobs.gold.folds.shared import IMAGE_TYPE, project_image
from tests.support.lambda_plans import optimized_plan, repeated_parses

ROWS = [
    ('{"a": "1", "b": null, "extra": "x"}', ["a", "b", "c"]),
    (None, ["a"]),
    ('{"a": "2"}', []),
]


def _projected(spark: SparkSession):
    frame = spark.createDataFrame(ROWS, "row_image string, value_columns array<string>")
    image = F.from_json("row_image", IMAGE_TYPE)
    return frame.select(project_image(image, F.col("value_columns")).alias("image"))


def test_every_declared_column_is_present_and_only_those(spark: SparkSession):
    images = [r["image"] for r in _projected(spark).collect()]

    assert images == [{"a": "1", "b": None, "c": None}, {"a": None}, {}]


def test_the_image_is_parsed_once_a_row_not_once_a_column(spark: SparkSession):
    projected = _projected(spark)

    assert "lambdafunction" in optimized_plan(projected)
    assert repeated_parses(projected) == []


def test_a_history_parses_each_event_once_not_once_a_column(spark: SparkSession):
    event = (
        "struct<op: string, row_image: string, seq: array<bigint>, change_id: string, "
        "source: string, event_ts: timestamp>"
    )
    history = spark.createDataFrame(
        [("t", '{"id":"1"}', [("upsert", '{"v": "a"}', [1, 0], "c1", "s", None)])],
        f"table_name string, _record_key string, h array<{event}>",
    )
    specs = spark.createDataFrame([("t", ["v"])], "table_name string, value_columns array<string>")
    states = row_states(history, specs)

    assert repeated_parses(states) == []
    assert states.first()["states"][0]["image"] == {"v": "a"}
