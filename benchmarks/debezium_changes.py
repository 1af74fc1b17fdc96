"""The Debezium part of the workload as a user reads it by hand: typed changes of
``shop.users`` with their op and sequence, for the peers of ``lakehouse run``."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

USER_COLUMNS = ("USER_ID", "TAX_CODE", "NAME", "COINS")
_ROW = "struct<USER_ID: bigint, TAX_CODE: string, NAME: string, COINS: bigint>"
# One landing line: a Kafka record whose key and value are JSON objects.
LANDING_SCHEMA = (
    "topic string, partition int, offset bigint, timestamp bigint, "
    "key struct<USER_ID: bigint>, "
    f"value struct<op: string, before: {_ROW}, after: {_ROW}, "
    "source: struct<ts_ms: bigint, lsn: bigint>>"
)


def user_changes(records: DataFrame) -> DataFrame:
    """``USER_ID``, the row's columns, ``op`` and the sequence (``ts_ms``, ``lsn``) of each
    change; the null-value tombstone that follows a delete carries nothing and is left out."""
    image = F.coalesce(F.col("value.after"), F.col("value.before"))
    return records.where(F.col("value").isNotNull()).select(
        F.col("key.USER_ID").alias("USER_ID"),
        *[image[c].alias(c) for c in USER_COLUMNS[1:]],
        F.col("value.op").alias("op"),
        F.col("value.source.ts_ms").alias("ts_ms"),
        F.col("value.source.lsn").alias("lsn"),
    )
