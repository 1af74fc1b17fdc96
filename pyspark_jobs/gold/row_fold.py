"""How full-row changes fold: the change with the highest ``seq`` per key wins.

Upserts carry the whole row and deletes remove it, so the net effect of any set of
changes of a key is its last one: the fold is order-free and idempotent. The key's
current gold row and its tombstone take part with their own ``seq``, so a change older
than what the table already reflects (or than a delete) loses, and a change already
applied (equal ``seq``) changes nothing.

A ``truncate`` (``record_key`` ``{}``) is a delete, at its ``seq``, of every key gold
holds or the batch touches; a row written after it (higher ``seq``) stays. Its tombstone
is kept under the table-wide key ``{}`` and guards every key, so a late change older than
the truncate cannot bring a row back. This compares ``seq`` across keys, which holds for
sources whose ``seq`` is table-wide (log positions, commit times).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pyspark_jobs.gold.net_state import as_net_state

FULL_ROW_OPS = ("upsert", "delete", "truncate")
TABLE_WIDE_KEY = "{}"


def fold_rows(changes: DataFrame, current: DataFrame, tombstones: DataFrame) -> DataFrame:
    """Net state of each key touched by ``changes``, only where a new change won.

    ``changes``: change-log rows of one table. ``current``: that table's gold rows
    (``_record_key``, ``_seq``). ``tombstones``: its tombstones (``record_key``, ``seq``).
    """
    new = changes.select(
        F.col("record_key").alias("_record_key"),
        F.col("seq").alias("_seq"),
        F.lit(0).alias("_rank"),
        F.col("op"),
        F.col("row_image"),
        F.col("change_id").alias("_change_id"),
        F.col("source").alias("_source"),
        F.col("event_ts").alias("_event_ts"),
    )
    is_truncate = (F.col("_record_key") == TABLE_WIDE_KEY) & (F.col("op") == "truncate")
    truncates = new.where(is_truncate).drop("_record_key")
    rows = new.where(F.col("_record_key") != TABLE_WIDE_KEY)
    # A truncate touches every key gold holds (the semi join is empty without one).
    everything = (
        current.select("_record_key", F.lit(1).alias("_j"))
        .join(truncates.select(F.lit(1).alias("_j")).limit(1), "_j", "left_semi")
        .drop("_j")
    )
    touched = rows.select("_record_key").unionByName(everything).distinct()
    truncated = touched.crossJoin(truncates).withColumn("op", F.lit("delete"))
    # On a seq tie the state already in gold wins: re-applying a change is a no-op.
    known = current.join(touched, "_record_key").select(
        "_record_key", "_seq", F.lit(1).alias("_rank"), F.lit("current").alias("op")
    )
    tombs = tombstones.select(F.col("record_key").alias("_record_key"), F.col("seq").alias("_seq"))
    table_tomb = tombs.where(F.col("_record_key") == TABLE_WIDE_KEY)
    deleted = (
        tombs.join(touched, "_record_key")
        .unionByName(touched.crossJoin(table_tomb.select("_seq")))
        .unionByName(table_tomb)
        .select("_record_key", "_seq", F.lit(1).alias("_rank"), F.lit("tombstone").alias("op"))
    )
    # The truncate itself competes with the table-wide tombstone kept so far: a newer one
    # comes out as a deleted state of key {} and becomes the new table-wide tombstone.
    table_wide = new.where(is_truncate)
    candidates = (
        rows.unionByName(truncated)
        .unionByName(known, allowMissingColumns=True)
        .unionByName(deleted, allowMissingColumns=True)
        .unionByName(table_wide, allowMissingColumns=True)
    )
    winners = (
        candidates.groupBy("_record_key")
        .agg(F.max_by(F.struct("*"), F.struct("_seq", "_rank")).alias("w"))
        .select("w.*")
        .where(F.col("_rank") == 0)
    )
    live = F.col("op") == "upsert"
    return as_net_state(
        winners.select(
            "_record_key",
            live.alias("_live"),
            F.when(live, F.from_json("row_image", "map<string, string>")).alias("_image"),
            "_seq",
            "_change_id",
            "_source",
            "_event_ts",
            F.lit(None).alias("_cell_ts"),
            F.when(~live, F.col("_seq")).alias("_tomb_seq"),
        )
    )
