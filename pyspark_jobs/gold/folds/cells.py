"""How Cassandra cells become row state: per-cell last-write-wins, as Cassandra does.

A key's state is a set of cells, each with a write time (``source.ts_ms``, microseconds),
plus the row-deletion time ``D``. For each column the cell with the latest write time
wins (a tombstone wins a tie, as in Cassandra); a cell is live if it is set and written
after ``D``. The row marker (``__row_marker__``, written by INSERT only) is a cell without
a value: it keeps an inserted row alive when all its columns are null, while a row
created by UPDATE disappears once its last cell is deleted. Taking maxima makes the fold
order-free and idempotent, so late and repeated changes need no special case.

All tables of the family fold together: ``table_name`` is part of every key.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pyspark_jobs.gold.folds.events import KEY
from pyspark_jobs.gold.folds.inputs import FoldInputs
from pyspark_jobs.gold.folds.shared import (
    CHANGES_TYPE,
    STATE_TYPE,
    as_net_state,
    canonical_image,
    project_image,
    sorted_entries,
    with_specs,
)

ROW_MARKER = "__row_marker__"
CELL_OPS = ("patch", "delete")


def _cells_of_changes(changes: DataFrame) -> DataFrame:
    return (
        changes.where(F.col("op") == "patch")
        .select(
            "table_name",
            F.col("record_key").alias("_record_key"),
            F.explode("changes").alias("column", "cell"),
        )
        .select(
            *KEY,
            "column",
            F.col("cell.ts").alias("ts"),
            (F.col("cell.op") == "delete").alias("is_tombstone"),
            F.col("cell.value").alias("value"),
        )
    )


def _cells_of_current(current: DataFrame) -> DataFrame:
    exploded = current.select(*KEY, "_image", F.explode("_cell_ts").alias("column", "ts"))
    value = F.col("_image")[F.col("column")]
    return exploded.select(
        *KEY,
        "column",
        "ts",
        # A null non-marker cell in gold is a deleted cell: it keeps its write time.
        (value.isNull() & (F.col("column") != ROW_MARKER)).alias("is_tombstone"),
        value.alias("value"),
    )


def _cells_of_tombstones(tombstones: DataFrame) -> DataFrame:
    return tombstones.select(
        "table_name",
        F.col("record_key").alias("_record_key"),
        F.explode("cell_ts").alias("column", "ts"),
    ).select(
        *KEY,
        "column",
        "ts",
        F.lit(True).alias("is_tombstone"),
        F.lit(None).cast("string").alias("value"),
    )


def fold_cells(inputs: FoldInputs) -> DataFrame:
    """Net state of each key touched by the new changes whose state actually changed.

    Changes are ``patch`` (cells) or ``delete`` (row deletion at ``seq[0]``). Gold rows
    bring their ``_image`` (column -> text), ``_cell_ts`` and the change they reflect;
    tombstones their ``seq`` (``[D]``) and ``cell_ts``.
    """
    changes = inputs.changes
    touched = changes.select("table_name", F.col("record_key").alias("_record_key")).distinct()
    current = inputs.current.join(touched, KEY)
    tombstones = inputs.tombstones.join(
        touched.withColumnRenamed("_record_key", "record_key"), ["table_name", "record_key"]
    )

    row_deletes = changes.where(F.col("op") == "delete").select(
        "table_name",
        F.col("record_key").alias("_record_key"),
        F.col("seq")[0].alias("deleted_ts"),
    )
    old_deletes = tombstones.select(
        "table_name",
        F.col("record_key").alias("_record_key"),
        F.col("seq")[0].alias("deleted_ts"),
    )
    deletion = (
        row_deletes.unionByName(old_deletes)
        .groupBy(*KEY)
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
                    current.select("table_name", F.col("_record_key").alias("record_key")),
                    ["table_name", "record_key"],
                    "left_anti",
                )
            )
        )
    )
    winners = cells.groupBy(*KEY, "column").agg(
        F.max_by(
            F.struct("ts", "is_tombstone", "value"),
            F.struct("ts", "is_tombstone", F.coalesce("value", F.lit(""))),
        ).alias("w")
    )
    resolved = winners.join(deletion, KEY, "left").select(
        *KEY,
        "column",
        F.col("w.ts").alias("ts"),
        (
            ~F.col("w.is_tombstone")
            & (F.col("deleted_ts").isNull() | (F.col("w.ts") > F.col("deleted_ts")))
        ).alias("live"),
        F.col("w.value").alias("value"),
        "deleted_ts",
    )
    per_key = resolved.groupBy(*KEY).agg(
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
    per_key = touched.join(per_key, KEY, "left").join(deletion, KEY, "left")
    # The row names the latest change it reflects: a late older write that sets a cell
    # does not move _seq back.
    latest = (
        changes.select(
            "table_name",
            F.col("record_key").alias("_record_key"),
            F.struct("seq", "change_id", "source", "event_ts").alias("c"),
        )
        .unionByName(
            current.select(
                *KEY,
                F.struct(
                    F.col("_seq").alias("seq"),
                    F.col("_change_id").alias("change_id"),
                    F.col("_source").alias("source"),
                    F.col("_event_ts").alias("event_ts"),
                ).alias("c"),
            )
        )
        .groupBy(*KEY)
        .agg(F.max_by("c", "c.seq").alias("c"))
    )
    image = project_image(F.col("_all"), F.col("value_columns"))
    state = with_specs(per_key.join(latest, KEY), inputs.specs, "value_columns", "types").select(
        *KEY,
        "types",
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
        *KEY,
        sorted_entries(F.col("_cell_ts")).alias("_old_ts"),
        sorted_entries(F.col("_image")).alias("_old_image"),
    )
    unchanged = (
        F.col("_old_ts").isNotNull()
        & F.col("_live")
        & (F.col("_old_ts") == sorted_entries(F.col("_cell_ts")))
        & (F.col("_old_image") == sorted_entries(canonical_image(F.col("_image"), inputs.types)))
    )
    state = state.join(before, KEY, "left").where(~unchanged).drop("_old_ts", "_old_image")
    old_tombs = tombstones.select(
        "table_name",
        F.col("record_key").alias("_record_key"),
        F.col("seq").alias("_old_tomb"),
        sorted_entries(F.col("cell_ts")).alias("_old_tomb_ts"),
    )
    stale_tomb = (
        F.col("_old_tomb").isNotNull()
        & ~F.col("_live")
        & (F.col("_old_tomb") == F.col("_tomb_seq"))
        & (F.col("_old_tomb_ts") == sorted_entries(F.col("_cell_ts")))
    )
    state = state.join(old_tombs, KEY, "left").where(~stale_tomb)
    return as_net_state(state)


_CELL = "struct<ts: bigint, tomb: boolean, value: string>"
_CELLS = f"map<string, {_CELL}>"


def _newer(a: Column, b: Column) -> Column:
    """The cell that wins between ``a`` and ``b``: later write, a tombstone on a tie."""
    rank_a = F.struct(a["ts"], a["tomb"], F.coalesce(a["value"], F.lit("")))
    rank_b = F.struct(b["ts"], b["tomb"], F.coalesce(b["value"], F.lit("")))
    return F.when(a.isNull(), b).when(b.isNull(), a).when(rank_b >= rank_a, b).otherwise(a)


def cell_states(history: DataFrame, specs: DataFrame) -> DataFrame:
    """Each key's state after every change of its sorted history ``h`` (for SCD2
    history): the cells written up to that change, resolved as ``fold_cells`` does."""
    keyed = with_specs(history, specs, "value_columns")

    def step(acc: Column, e: Column) -> Column:
        written = F.transform_values(
            F.coalesce(e["changes"], F.create_map().cast(CHANGES_TYPE)),
            lambda _, c: F.struct(
                c["ts"].alias("ts"), (c["op"] == "delete").alias("tomb"), c["value"].alias("value")
            ),
        )
        cells = F.when(
            e["op"] == "patch",
            F.map_zip_with(acc["cells"], written, lambda _, a, b: _newer(a, b)),
        ).otherwise(acc["cells"])
        deleted = F.when(e["op"] == "delete", F.greatest(acc["deleted_ts"], e["seq"][0])).otherwise(
            acc["deleted_ts"]
        )

        def alive(c: Column) -> Column:
            return ~c["tomb"] & (deleted.isNull() | (c["ts"] > deleted))

        live = F.exists(F.map_values(cells), alive)
        values = F.transform_values(
            cells, lambda k, c: F.when(alive(c) & (k != ROW_MARKER), c["value"])
        )
        state = F.struct(
            live.alias("live"),
            F.when(live, project_image(values, F.col("value_columns"))).alias("image"),
            e["seq"].alias("seq"),
            e["change_id"].alias("change_id"),
            e["source"].alias("source"),
            e["event_ts"].alias("event_ts"),
            F.when(~live, F.array(F.coalesce(deleted, F.lit(0)))).alias("deleted_seq"),
        )
        return F.struct(
            cells.alias("cells"),
            deleted.alias("deleted_ts"),
            F.concat(acc["states"], F.array(state)).alias("states"),
        )

    start = F.struct(
        F.create_map().cast(_CELLS).alias("cells"),
        F.lit(None).cast("bigint").alias("deleted_ts"),
        F.array().cast(f"array<{STATE_TYPE}>").alias("states"),
    )
    return keyed.select(*KEY, F.aggregate("h", start, step)["states"].alias("states"))
