"""How a landing-file line becomes a Kafka record, or a quarantine reason.

A landing line holds one Kafka record as JSON:
``{"topic", "partition", "offset", "timestamp", "key", "value"}``. ``key`` and ``value``
are either a JSON string (the record's bytes as text, kept exactly) or an embedded JSON
document (kept as its compact JSON text); ``"value": null`` is a Kafka tombstone.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

LINE_SCHEMA = (
    "topic string, `partition` int, `offset` bigint, `timestamp` bigint, key string, value string"
)
_REQUIRED = ("topic", "partition", "offset", "value")


def _problem(parsed: Column, keys: Column) -> Column:
    """The first reason the line is not a usable record, or null when it is one."""
    reason = F.when(
        keys.isNull(), F.lit("not a JSON object (malformed, truncated or nested too deeply)")
    )
    for name in _REQUIRED:
        reason = reason.when(~F.array_contains(keys, name), F.lit(f"missing field: {name}"))
    for name, expected in (("topic", "a string"), ("partition", "an integer"), ("offset", "an integer")):
        reason = reason.when(parsed[name].isNull(), F.lit(f"{name} is not {expected}"))
    return reason.when(
        F.array_contains(keys, "timestamp")
        & F.get_json_object(F.col("line"), "$.timestamp").isNotNull()
        & parsed["timestamp"].isNull(),
        F.lit("timestamp is not epoch milliseconds"),
    )


def parse_landing_lines(lines: DataFrame) -> DataFrame:
    """Turn ``line``/``landing_file`` rows into record columns plus ``problem``.

    ``problem`` is null for a good record; otherwise it says why the line goes to
    quarantine, and ``line`` keeps the raw text.
    """
    parsed = F.from_json(F.col("line"), LINE_SCHEMA)
    keys = F.expr("json_object_keys(line)")
    return (
        lines.withColumn("_r", parsed)
        .withColumn("_keys", keys)
        .select(
            F.col("_r.topic").alias("topic"),
            F.col("_r.partition").alias("partition"),
            F.col("_r.offset").alias("offset"),
            F.timestamp_millis(F.col("_r.timestamp")).alias("kafka_timestamp"),
            F.col("_r.key").alias("key"),
            F.col("_r.value").alias("value"),
            F.col("landing_file"),
            F.col("line").alias("raw"),
            _problem(F.col("_r"), F.col("_keys")).alias("problem"),
        )
    )
