"""How Cassandra cells become row state: per-cell last-write-wins, as Cassandra does.

A key's state is a set of cells, each with a write time (``source.ts_ms``, microseconds),
plus the row-deletion time ``D``. For each column the cell with the latest write time
wins (a tombstone wins a tie, as in Cassandra); a cell is live if it is set and written
after ``D``. The row marker (``__row_marker__``, written by INSERT only) is a cell without
a value: it keeps an inserted row alive when all its columns are null, while a row
created by UPDATE disappears once its last cell is deleted. Taking maxima makes the fold
order-free and idempotent, so late and repeated changes need no special case.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pyspark_jobs.gold.net_state import as_net_state

ROW_MARKER = "__row_marker__"
CELL_OPS = ("patch", "delete")


def _cells_of_changes(changes: DataFrame) -> DataFrame:
    return (
        changes.where(F.col("op") == "patch")
        .select(
            F.col("record_key").alias("_record_key"),
            F.explode("changes").alias("column", "cell"),
        )
        .select(
            "_record_key",
            "column",
            F.col("cell.ts").alias("ts"),
            (F.col("cell.op") == "delete").alias("is_tombstone"),
            F.col("cell.value").alias("value"),
        )
    )


def _cells_of_current(current: DataFrame) -> DataFrame:
    exploded = current.select("_record_key", "_image", F.explode("_cell_ts").alias("column", "ts"))
    value = F.col("_image")[F.col("column")]
    return exploded.select(
        "_record_key",
        "column",
        "ts",
        # A null non-marker cell in gold is a deleted cell: it keeps its write time.
        (value.isNull() & (F.col("column") != ROW_MARKER)).alias("is_tombstone"),
        value.alias("value"),
    )


def _cells_of_tombstones(tombstones: DataFrame) -> DataFrame:
    return tombstones.select(
        F.col("record_key").alias("_record_key"), F.explode("cell_ts").alias("column", "ts")
    ).select(
        "_record_key",
        "column",
        "ts",
        F.lit(True).alias("is_tombstone"),
        F.lit(None).cast("string").alias("value"),
    )


def _sorted_entries(m: Column) -> Column:
    # Maps are not comparable in Spark; their sorted entries are.
    return F.array_sort(F.map_entries(m))


def fold_cells(
    changes: DataFrame, current: DataFrame, tombstones: DataFrame, value_columns: list[str]
) -> DataFrame:
    """Net state of each key touched by ``changes`` whose state actually changed.

    ``changes``: change-log rows of one table (ops ``patch``/``delete``). ``current``: gold
    rows as ``_record_key``, ``_image`` (column -> text), ``_cell_ts`` and the ``_seq``,
    ``_change_id``, ``_source``, ``_event_ts`` of the change they reflect. ``tombstones``:
    ``record_key``, ``seq`` (``[D]``) and ``cell_ts`` of deleted keys.
    """
    touched = changes.select(F.col("record_key").alias("_record_key")).distinct()
    current = current.join(touched, "_record_key")
    tombstones = tombstones.join(
        touched.withColumnRenamed("_record_key", "record_key"), "record_key"
    )

    row_deletes = changes.where(F.col("op") == "delete").select(
        F.col("record_key").alias("_record_key"), F.col("seq")[0].alias("deleted_ts")
    )
    old_deletes = tombstones.select(
        F.col("record_key").alias("_record_key"), F.col("seq")[0].alias("deleted_ts")
    )
    deletion = (
        row_deletes.unionByName(old_deletes)
        .groupBy("_record_key")
        .agg(F.max("deleted_ts").alias("deleted_ts"))
    )

    cells = (
        _cells_of_changes(changes)
        .unionByName(_cells_of_current(current))
        # A live row's own cells are the truth; the tombstone of a key that is live again
        # only contributes its deletion time, not its (older) cell times as tombstones.
        .unionByName(
            _cells_of_tombstones(
                tombstones.join(
                    current.select(F.col("_record_key").alias("record_key")),
                    "record_key",
                    "left_anti",
                )
            )
        )
    )
    winners = cells.groupBy("_record_key", "column").agg(
        F.max_by(
            F.struct("ts", "is_tombstone", "value"),
            F.struct("ts", "is_tombstone", F.coalesce("value", F.lit(""))),
        ).alias("w")
    )
    resolved = winners.join(deletion, "_record_key", "left").select(
        "_record_key",
        "column",
        F.col("w.ts").alias("ts"),
        (
            ~F.col("w.is_tombstone")
            & (F.col("deleted_ts").isNull() | (F.col("w.ts") > F.col("deleted_ts")))
        ).alias("live"),
        F.col("w.value").alias("value"),
        "deleted_ts",
    )
    per_key = resolved.groupBy("_record_key").agg(
        F.max("live").alias("_live"),
        F.map_from_entries(
            F.collect_list(
                F.struct(
                    "column",
                    F.when(F.col("live") & (F.col("column") != ROW_MARKER), F.col("value")),
                )
            )
        ).alias("_all"),
        F.map_from_entries(F.collect_list(F.struct("column", "ts"))).alias("_cell_ts"),
    )
    # A key whose only news is a row delete has no cells at all: it must still get its
    # state (not live) and its tombstone, or a later older write would resurrect it.
    per_key = touched.join(per_key, "_record_key", "left").join(deletion, "_record_key", "left")
    # The row names the latest change it reflects: a late older write that sets a cell
    # does not move _seq back.
    latest = (
        changes.select(
            F.col("record_key").alias("_record_key"),
            F.struct("seq", "change_id", "source", "event_ts").alias("c"),
        )
        .unionByName(
            current.select(
                "_record_key",
                F.struct(
                    F.col("_seq").alias("seq"),
                    F.col("_change_id").alias("change_id"),
                    F.col("_source").alias("source"),
                    F.col("_event_ts").alias("event_ts"),
                ).alias("c"),
            )
        )
        .groupBy("_record_key")
        .agg(F.max_by("c", "c.seq").alias("c"))
    )
    image = F.map_from_arrays(
        F.array(*[F.lit(c) for c in value_columns]).cast("array<string>"),
        F.array(*[F.col("_all")[c] for c in value_columns]).cast("array<string>"),
    )
    state = per_key.join(latest, "_record_key").select(
        "_record_key",
        F.coalesce(F.col("_live"), F.lit(False)).alias("_live"),
        image.alias("_image"),
        F.col("c.seq").alias("_seq"),
        F.col("c.change_id").alias("_change_id"),
        F.col("c.source").alias("_source"),
        F.col("c.event_ts").alias("_event_ts"),
        "_cell_ts",
        F.when(
            F.col("deleted_ts").isNotNull() | ~F.coalesce(F.col("_live"), F.lit(False)),
            F.array(F.coalesce(F.col("deleted_ts"), F.lit(0)).cast("bigint")),
        ).alias("_tomb_seq"),
    )
    # Keys whose cells did not change (everything new lost or was seen before) are left
    # alone, so a re-run writes nothing.
    # Write times alone are not enough: a row delete hides cells without changing them.
    before = current.select(
        "_record_key",
        _sorted_entries(F.col("_cell_ts")).alias("_old_ts"),
        _sorted_entries(F.col("_image")).alias("_old_image"),
    )
    unchanged = (
        F.col("_old_ts").isNotNull()
        & F.col("_live")
        & (F.col("_old_ts") == _sorted_entries(F.col("_cell_ts")))
        & (F.col("_old_image") == _sorted_entries(F.col("_image")))
    )
    state = (
        state.join(before, "_record_key", "left").where(~unchanged).drop("_old_ts", "_old_image")
    )
    old_tombs = tombstones.select(
        F.col("record_key").alias("_record_key"),
        F.col("seq").alias("_old_tomb"),
        _sorted_entries(F.col("cell_ts")).alias("_old_tomb_ts"),
    )
    stale_tomb = (
        F.col("_old_tomb").isNotNull()
        & ~F.col("_live")
        & (F.col("_old_tomb") == F.col("_tomb_seq"))
        & (F.col("_old_tomb_ts") == _sorted_entries(F.col("_cell_ts")))
    )
    state = state.join(old_tombs, "_record_key", "left").where(~stale_tomb)
    return as_net_state(state)
