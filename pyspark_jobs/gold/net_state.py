"""The shape every fold returns: one net state per touched key, ready to MERGE.

Columns: ``_record_key``; ``_live`` (false: the key is deleted); ``_image`` (declared
column -> value text); ``_seq``, ``_change_id``, ``_source``, ``_event_ts`` of the change
that decided the state; ``_cell_ts`` (per-cell write times, or null); ``_tomb_seq`` (the
delete's seq to keep as a tombstone, or null).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pyspark_jobs.gold.tables import CELL_TS_TYPE, SEQ_TYPE

NET_STATE_COLUMNS = (
    "_record_key",
    "_live",
    "_image",
    "_seq",
    "_change_id",
    "_source",
    "_event_ts",
    "_cell_ts",
    "_tomb_seq",
)


def as_net_state(frame: DataFrame) -> DataFrame:
    """Select the net-state columns in order with their canonical types."""
    return frame.select(
        F.col("_record_key").cast("string"),
        F.col("_live").cast("boolean"),
        F.col("_image").cast("map<string, string>"),
        F.col("_seq").cast(SEQ_TYPE),
        F.col("_change_id").cast("string"),
        F.col("_source").cast("string"),
        F.col("_event_ts").cast("timestamp"),
        F.col("_cell_ts").cast(CELL_TS_TYPE),
        F.col("_tomb_seq").cast(SEQ_TYPE),
    )
