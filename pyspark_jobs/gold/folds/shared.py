"""What every fold shares: the table-wide key, image projection, the state shapes, and
the filter that drops states gold already holds."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pyspark_jobs.array_lookups import restricted_map
from pyspark_jobs.gold.folds.inputs import FoldInputs
from pyspark_jobs.gold.tables import CELL_TS_TYPE, SEQ_TYPE
from pyspark_jobs.gold.typed_values import canonical_text

# The record key of a change that applies to a whole table (a truncate, a vertex-type
# delete) and of the table-wide tombstone it leaves.
TABLE_WIDE_KEY = "{}"
IMAGE_TYPE = "map<string, string>"
CHANGES_TYPE = "map<string, struct<op: string, value: string, ts: bigint>>"

# One key's state after a change, as the re-fold families and SCD2 history see it.
STATE_TYPE = (
    f"struct<live: boolean, image: {IMAGE_TYPE}, seq: {SEQ_TYPE}, change_id: string, "
    f"source: string, event_ts: timestamp, deleted_seq: {SEQ_TYPE}>"
)

# The net state of a key, ready to MERGE: ``_live`` (false: deleted); ``_image`` (declared
# value column -> value text); ``_seq``, ``_change_id``, ``_source``, ``_event_ts`` of the
# change that decided it; ``_cell_ts`` (per-cell write times, or null); ``_tomb_seq`` (the
# delete's seq to keep as a tombstone, or null).
NET_STATE_COLUMNS = (
    "table_name",
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


NET_STATE_SCHEMA = (
    f"table_name string, _record_key string, _live boolean, _image {IMAGE_TYPE}, "
    f"_seq {SEQ_TYPE}, _change_id string, _source string, _event_ts timestamp, "
    f"_cell_ts {CELL_TS_TYPE}, _tomb_seq {SEQ_TYPE}"
)


def as_net_state(frame: DataFrame) -> DataFrame:
    """Select the net-state columns in order with their canonical types."""
    return frame.select(
        F.col("table_name").cast("string"),
        F.col("_record_key").cast("string"),
        F.col("_live").cast("boolean"),
        F.col("_image").cast(IMAGE_TYPE),
        F.col("_seq").cast(SEQ_TYPE),
        F.col("_change_id").cast("string"),
        F.col("_source").cast("string"),
        F.col("_event_ts").cast("timestamp"),
        F.col("_cell_ts").cast(CELL_TS_TYPE),
        F.col("_tomb_seq").cast(SEQ_TYPE),
    )


def project_image(image: Column, columns: Column) -> Column:
    """``image`` reduced to ``columns`` (an array column, e.g. the table's value columns):
    every declared column present, null where the image has no value. The image is
    computed once, not once per column (``array_lookups``)."""
    return restricted_map(image, columns)


def sorted_entries(m: Column) -> Column:
    """A map as its sorted entries: maps are not comparable in Spark, these are."""
    return F.array_sort(F.map_entries(m))


def with_specs(frame: DataFrame, specs: DataFrame, *columns: str) -> DataFrame:
    """``frame`` with the named per-table facts of ``specs`` joined by ``table_name``."""
    return frame.join(F.broadcast(specs.select("table_name", *columns)), "table_name")


def canonical_image(image: Column, types: tuple[str, ...]) -> Column:
    """``image`` with each value as the canonical text of its declared type (the ``types``
    map column of the specs), for comparing a fold's image with gold's typed row."""
    return F.transform_values(image, lambda k, v: canonical_text(v, F.col("types")[k], types))


def drop_unchanged(net: DataFrame, inputs: FoldInputs) -> DataFrame:
    """Only the states that differ from gold: re-folding an unchanged key writes nothing.

    Gold rows come as ``table_name``, ``_record_key``, ``_seq``, ``_image``; values are
    compared as their declared types. A deleted state of a key gold does not hold has
    nothing to delete.
    """
    old = inputs.current.select(
        "table_name",
        "_record_key",
        F.col("_seq").alias("_old_seq"),
        sorted_entries(F.col("_image")).alias("_old_image"),
    )
    joined = with_specs(net.join(old, ["table_name", "_record_key"], "left"), inputs.specs, "types")
    in_gold = F.col("_old_seq").isNotNull()
    same = (
        in_gold
        & F.col("_live")
        & (F.col("_old_seq") == F.col("_seq"))
        & (F.col("_old_image") == sorted_entries(canonical_image(F.col("_image"), inputs.types)))
    )
    return joined.where(~same & (F.col("_live") | in_gold)).select(*NET_STATE_COLUMNS)
