"""Which change-log rows make up a key's full history, for the folds that re-fold it.

Ops that do not commute (TigerGraph attribute ops, entity-patch ops) cannot be applied
on top of the current gold row when a change arrives late or twice: the key is re-folded
from every change silver holds for it. SCD2 history is built the same way, for every
family. An event is one such change as the folds see it: ``table_name``,
``_record_key``, ``seq``, ``change_id``, ``op``, ``changes``, ``row_image``, ``source``,
``event_ts``. A truncate (``record_key`` ``{}``) becomes a delete event of every key of
its table, at the truncate's ``seq``: a key written after it lives on.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pyspark_jobs.gold.folds.shared import TABLE_WIDE_KEY

EVENT_COLUMNS = (
    "table_name",
    "_record_key",
    "seq",
    "change_id",
    "op",
    "changes",
    "row_image",
    "source",
    "event_ts",
)
KEY = ["table_name", "_record_key"]


def as_events(rows: DataFrame) -> DataFrame:
    """Change-log rows as events (``record_key`` becomes ``_record_key``)."""
    return rows.select("table_name", F.col("record_key").alias("_record_key"), *EVENT_COLUMNS[2:])


def own_events(history: DataFrame, specs: DataFrame) -> DataFrame:
    """The events of the tables in ``specs``: their change-log rows in ``history``, with
    table-wide truncates expanded to the keys of their table."""
    return expand_truncates(
        as_events(history.join(F.broadcast(specs.select("table_name")), "table_name"))
    )


def rows_of_touched_keys(log: DataFrame, specs: DataFrame, changes: DataFrame) -> DataFrame:
    """The rows of ``log`` (change-log rows) that the histories of the keys ``changes``
    (the new rows) touch are made of, when a key's events are its own rows: the rows of
    those keys, the truncates of their tables, and every row of a table a new row
    truncates."""
    key = ["table_name", "record_key"]
    truncated = changes.where(
        (F.col("record_key") == TABLE_WIDE_KEY) & (F.col("op") == "truncate")
    ).select("table_name")
    wanted = (
        changes.select(*key)
        .unionByName(specs.select("table_name", F.lit(TABLE_WIDE_KEY).alias("record_key")))
        .unionByName(
            log.join(F.broadcast(truncated.distinct()), "table_name", "left_semi").select(*key)
        )
        .distinct()
    )
    return log.join(wanted, key, "left_semi")


def is_table_wide() -> Column:
    """True for an event that truncates a whole table."""
    return (F.col("_record_key") == TABLE_WIDE_KEY) & (F.col("op") == "truncate")


def expand_truncates(events: DataFrame, keys: DataFrame | None = None) -> DataFrame:
    """Replace each table-wide truncate by a delete of every key of its table.

    ``keys`` (``table_name``, ``_record_key``): the keys a truncate deletes; by default
    every key among ``events``.
    """
    keyed = events.where(~is_table_wide())
    truncates = events.where(is_table_wide()).drop("_record_key")
    if keys is None:
        keys = keyed.select(*KEY)
    deletes = keys.distinct().join(truncates, "table_name").withColumn("op", F.lit("delete"))
    return keyed.unionByName(deletes)


def sorted_history(events: DataFrame, new_ids: DataFrame) -> DataFrame:
    """``table_name``, ``_record_key``, ``h``: the events of every key with at least one
    new event, in ``seq`` order (``change_id`` breaks ties, so every run folds them the
    same way), each change once.

    ``new_ids``: ``change_id`` of the change-log rows not applied yet. Events derived from
    a change (a cascade, a truncate's deletes) carry its ``change_id``, so a new vertex
    delete also marks the edges it deletes. A change counts once per key even if it
    reached the log twice (a defence in depth: silver already keeps one row per
    ``change_id``); its copies sort next to each other.
    """

    def order(a: Column, b: Column) -> Column:
        # Maps (``changes``) are not comparable, so compare (seq, change_id) only.
        x, y = F.struct(a["seq"], a["change_id"]), F.struct(b["seq"], b["change_id"])
        return F.when(x < y, -1).when(x > y, 1).otherwise(0)

    flagged = events.join(new_ids.distinct().withColumn("_new", F.lit(True)), "change_id", "left")
    grouped = (
        flagged.groupBy(*KEY)
        .agg(
            F.array_sort(
                F.collect_list(
                    F.struct("seq", "change_id", "op", "changes", "row_image", "source", "event_ts")
                ),
                order,
            ).alias("h"),
            F.max(F.coalesce("_new", F.lit(False))).alias("_touched"),
        )
        .where(F.col("_touched"))
    )
    return grouped.select(
        *KEY,
        F.filter(
            "h",
            lambda e, i: F.when(i == 0, F.lit(True)).otherwise(
                F.col("h")[i - 1]["change_id"] != e["change_id"]
            ),
        ).alias("h"),
    )
