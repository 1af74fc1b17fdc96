"""How a key's ordered history folds into its state when ops do not commute.

Each key's events are sorted by ``seq`` (then ``change_id``, so ties fold the same way on
every run) and folded with Spark's ``aggregate`` into ``exists`` plus an image (column ->
value text). Because the fold starts from nothing and reads the whole history, a late
change lands in its place and a redelivered one (same ``change_id``, kept once by silver)
cannot count twice. Ops:

- ``patch``: every attribute in ``changes`` gets ``apply_op`` (TigerGraph op semantics);
  the key exists afterwards.
- ``insert_if_absent``: like ``patch``, but only when the key does not exist.
- ``upsert``: the row image replaces the state.
- ``delete``: the key stops existing and its attributes reset (a re-insert starts from
  defaults).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pyspark_jobs.gold.history_events import sorted_history
from pyspark_jobs.gold.net_state import as_net_state
from pyspark_jobs.gold.tigergraph_ops import apply_op, categories

_EMPTY_IMAGE = "map<string, string>"
_CHANGES = "map<string, struct<op: string, value: string, ts: bigint>>"


def _step(types: Column):
    def step(acc: Column, x: Column) -> Column:
        existed = acc["exists"]
        op = x["op"]
        applied = F.map_zip_with(
            acc["image"],
            F.coalesce(x["changes"], F.create_map().cast(_CHANGES)),
            lambda k, old, chg: F.when(chg.isNull(), old).otherwise(
                apply_op(chg["op"], old, chg["value"], types[k], existed)
            ),
        )
        ignored = (op == "insert_if_absent") & existed
        gone = op.isin("delete", "truncate")
        image = (
            F.when(gone, F.create_map().cast(_EMPTY_IMAGE))
            .when(ignored, acc["image"])
            .when(op == "upsert", F.from_json(x["row_image"], _EMPTY_IMAGE))
            .when(op.isin("patch", "insert_if_absent"), applied)
            .otherwise(acc["image"])
        )
        return F.struct(
            F.when(gone, F.lit(False))
            .when(op.isin("patch", "insert_if_absent", "upsert"), F.lit(True))
            .otherwise(existed)
            .alias("exists"),
            image.alias("image"),
            F.when(ignored, acc["last"]).otherwise(x).alias("last"),
            F.when(gone, x["seq"]).otherwise(acc["deleted_seq"]).alias("deleted_seq"),
        )

    return step


def fold_history(
    events: DataFrame, columns: Mapping[str, str], value_columns: list[str]
) -> DataFrame:
    """Net state of every key in ``events`` (each key's FULL history), by ordered fold.

    ``columns``: declared column -> type (selects each attribute's op category).
    """
    history = sorted_history(events)
    first = F.col("h")[0]
    start = F.struct(
        F.lit(False).alias("exists"),
        F.create_map().cast(_EMPTY_IMAGE).alias("image"),
        first.alias("last"),
        F.lit(None).cast("array<bigint>").alias("deleted_seq"),
    )
    folded = history.select(
        "_record_key", F.aggregate("h", start, _step(categories(columns))).alias("s")
    )
    image = F.map_from_arrays(
        F.array(*[F.lit(c) for c in value_columns]).cast("array<string>"),
        F.array(*[F.col("s.image")[c] for c in value_columns]).cast("array<string>"),
    )
    return as_net_state(
        folded.select(
            "_record_key",
            F.col("s.exists").alias("_live"),
            F.when(F.col("s.exists"), image).alias("_image"),
            F.col("s.last.seq").alias("_seq"),
            F.col("s.last.change_id").alias("_change_id"),
            F.col("s.last.source").alias("_source"),
            F.col("s.last.event_ts").alias("_event_ts"),
            F.lit(None).alias("_cell_ts"),
            F.when(~F.col("s.exists"), F.col("s.deleted_seq")).alias("_tomb_seq"),
        )
    )


def _entries(m: Column) -> Column:
    return F.array_sort(F.map_entries(m))


def changed_states(net: DataFrame, current: DataFrame) -> DataFrame:
    """Only the states that differ from gold: re-folding an unchanged key writes nothing.

    ``current``: gold rows as ``_record_key``, ``_seq``, ``_image``. A deleted state of a
    key gold does not hold has nothing to delete.
    """
    old = current.select(
        "_record_key",
        F.col("_seq").alias("_old_seq"),
        _entries(F.col("_image")).alias("_old_image"),
    )
    joined = net.join(old, "_record_key", "left")
    in_gold = F.col("_old_seq").isNotNull()
    same = (
        in_gold
        & F.col("_live")
        & (F.col("_old_seq") == F.col("_seq"))
        & (F.col("_old_image") == _entries(F.col("_image")))
    )
    return joined.where(~same & (F.col("_live") | in_gold)).drop("_old_seq", "_old_image")
