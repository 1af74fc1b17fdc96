"""How full-row changes fold: the change with the highest ``seq`` per key wins.

Upserts carry the whole row and deletes remove it, so the net effect of any set of
changes of a key is its last one: the fold is order-free and idempotent. The key's
current gold row and its tombstone take part with their own ``seq``, so a change older
than what the table already reflects (or than a delete) loses, and a change already
applied (equal ``seq``) changes nothing.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pyspark_jobs.gold.net_state import as_net_state

FULL_ROW_OPS = ("upsert", "delete")


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
    touched = new.select("_record_key").distinct()
    # On a seq tie the state already in gold wins: re-applying a change is a no-op.
    known = current.join(touched, "_record_key").select(
        "_record_key", "_seq", F.lit(1).alias("_rank"), F.lit("current").alias("op")
    )
    deleted = (
        tombstones.select(F.col("record_key").alias("_record_key"), F.col("seq").alias("_seq"))
        .join(touched, "_record_key")
        .select("_record_key", "_seq", F.lit(1).alias("_rank"), F.lit("tombstone").alias("op"))
    )
    candidates = new.unionByName(known, allowMissingColumns=True).unionByName(
        deleted, allowMissingColumns=True
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
