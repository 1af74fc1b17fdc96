"""How full-row changes fold: the change with the highest ``seq`` per key wins.

Upserts carry the whole row and deletes remove it, so the net effect of any set of
changes of a key is its last one: the fold is order-free and idempotent. The key's
current gold row and its tombstone take part with their own ``seq``, so a change older
than what the table already reflects (or than a delete) loses, and a change already
applied (equal ``seq``) changes nothing.

A ``truncate`` (``record_key`` ``{}``) is a delete, at its ``seq``, of every key gold
holds or the batch touches; a row written after it (higher ``seq``) stays. Its tombstone
is kept under the table-wide key ``{}`` and guards every key of the table, so a late
change older than the truncate cannot bring a row back. This compares ``seq`` across
keys, which holds for sources whose ``seq`` is table-wide (log positions, commit times).

All tables of the family fold together: ``table_name`` is part of every key.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pyspark_jobs.gold.folds.events import KEY
from pyspark_jobs.gold.folds.inputs import FoldInputs
from pyspark_jobs.gold.folds.shared import (
    IMAGE_TYPE,
    TABLE_WIDE_KEY,
    as_net_state,
    project_image,
    with_specs,
)


def fold_rows(inputs: FoldInputs) -> DataFrame:
    """Net state of each key the new changes touch, only where a new change won."""
    new = inputs.changes.select(
        "table_name",
        F.col("record_key").alias("_record_key"),
        F.col("seq").alias("_seq"),
        F.lit(0).alias("_rank"),
        F.col("op"),
        F.col("row_image"),
        F.col("change_id").alias("_change_id"),
        F.col("source").alias("_source"),
        F.col("event_ts").alias("_event_ts"),
    )
    current = inputs.current
    is_truncate = (F.col("_record_key") == TABLE_WIDE_KEY) & (F.col("op") == "truncate")
    truncates = new.where(is_truncate).drop("_record_key")
    rows = new.where(F.col("_record_key") != TABLE_WIDE_KEY)
    # A truncate touches every key gold holds in its table.
    everything = current.select(*KEY).join(
        truncates.select("table_name").distinct(), "table_name", "left_semi"
    )
    touched = rows.select(*KEY).unionByName(everything).distinct()
    truncated = touched.join(truncates, "table_name").withColumn("op", F.lit("delete"))
    # On a seq tie the state already in gold wins: re-applying a change is a no-op.
    known = current.join(touched, KEY).select(
        *KEY, "_seq", F.lit(1).alias("_rank"), F.lit("current").alias("op")
    )
    tombs = inputs.tombstones.select(
        "table_name", F.col("record_key").alias("_record_key"), F.col("seq").alias("_seq")
    )
    table_tomb = tombs.where(F.col("_record_key") == TABLE_WIDE_KEY)
    deleted = (
        tombs.join(touched, KEY)
        .unionByName(touched.join(table_tomb.drop("_record_key"), "table_name"))
        .unionByName(table_tomb)
        .select(*KEY, "_seq", F.lit(1).alias("_rank"), F.lit("tombstone").alias("op"))
    )
    # The truncate itself competes with the table-wide tombstone kept so far: a newer one
    # comes out as a deleted state of key {} and becomes the new table-wide tombstone.
    candidates = (
        rows.unionByName(truncated)
        .unionByName(known, allowMissingColumns=True)
        .unionByName(deleted, allowMissingColumns=True)
        .unionByName(new.where(is_truncate), allowMissingColumns=True)
    )
    winners = (
        candidates.groupBy(*KEY)
        .agg(F.max_by(F.struct("*"), F.struct("_seq", "_rank")).alias("w"))
        .select("w.*")
        .where(F.col("_rank") == 0)
    )
    live = F.col("op") == "upsert"
    return as_net_state(
        with_specs(winners, inputs.specs, "value_columns").select(
            *KEY,
            live.alias("_live"),
            F.when(
                live,
                project_image(F.from_json("row_image", IMAGE_TYPE), F.col("value_columns")),
            ).alias("_image"),
            "_seq",
            "_change_id",
            "_source",
            "_event_ts",
            F.lit(None).alias("_cell_ts"),
            F.when(~live, F.col("_seq")).alias("_tomb_seq"),
        )
    )


def row_states(history: DataFrame, specs: DataFrame) -> DataFrame:
    """Each key's state after every change of its sorted history ``h``: an upsert's row,
    or nothing after a delete."""
    keyed = with_specs(history, specs, "value_columns")
    return keyed.select(
        *KEY,
        F.transform(
            "h",
            lambda e: F.struct(
                (e["op"] == "upsert").alias("live"),
                F.when(
                    e["op"] == "upsert",
                    project_image(F.from_json(e["row_image"], IMAGE_TYPE), F.col("value_columns")),
                ).alias("image"),
                e["seq"].alias("seq"),
                e["change_id"].alias("change_id"),
                e["source"].alias("source"),
                e["event_ts"].alias("event_ts"),
                F.when(e["op"] != "upsert", e["seq"]).alias("deleted_seq"),
            ),
        ).alias("states"),
    )
