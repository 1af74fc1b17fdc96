"""Timestamp values that cast only by changing them are cast failures, never other instants."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.gold.typed_values import cast_failed, cast_value

# (value text, whether it is a cast failure in a timestamp value column)
TIMESTAMP_VALUES = [
    ("1700000000000", False),  # epoch milliseconds
    ("-62135596800000", False),  # 0001-01-01, the first instant SQL databases hold
    ("253402300799999", False),  # 9999-12-31 23:59:59.999, the last
    ("253402300800000", True),  # year 10000
    ("1700000000000000", True),  # epoch microseconds where milliseconds are expected
    ("1700000000000000000", True),  # nanoseconds
    ("9223372036854775807", True),  # timestamp_millis would overflow (an error, not a null)
    ("2024-01-01T10:00:00.123456Z", False),
    ("2024-01-01T10:00:00.123456000Z", False),  # zeros past the microsecond lose nothing
    ("2024-01-01T10:00:00.123456789Z", True),  # nanoseconds cut to microseconds
    ("not a time", True),
]


def test_epoch_micros_nanos_and_sub_microsecond_times_are_cast_failures(spark: SparkSession):
    frame = spark.createDataFrame([(v,) for v, _ in TIMESTAMP_VALUES], "v string")
    rows = frame.select(
        "v",
        cast_failed(F.col("v"), "timestamp").alias("failed"),
        # as text: Python's datetime has no year-1 instant in every time zone
        cast_value(F.col("v"), "timestamp", exact=True).cast("string").alias("typed"),
    ).collect()

    assert [(r["v"], r["failed"]) for r in rows] == TIMESTAMP_VALUES
    typed = {r["v"]: r["typed"] for r in rows}
    assert typed["1700000000000"] == "2023-11-14 22:13:20"
    assert typed["-62135596800000"] == "0001-01-01 00:00:00"
    assert typed["2024-01-01T10:00:00.123456000Z"] == "2024-01-01 10:00:00.123456"
    assert all(typed[v] is None for v, failed in TIMESTAMP_VALUES if failed)
