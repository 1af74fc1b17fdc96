"""How a TigerGraph key's ordered history folds into its state (ops do not commute).

Each key's events (``graph_events``: own messages, implicit source vertices, cascades)
are sorted by ``seq`` (then ``change_id``, so ties fold the same way on every run) and
folded with Spark's ``aggregate`` from "does not exist, every attribute at its default".
Because the fold reads the key's whole history, a late change lands in its place and a
redelivered one (same ``change_id``, kept once) cannot count twice. Ops:

- ``patch``: every attribute in ``changes`` gets ``apply_op`` on its current value
  (TigerGraph op semantics); the key exists afterwards;
- ``insert_if_absent`` (``insert-only``, implicit vertices): like ``patch``, but only
  when the key does not exist;
- ``delete`` (and a truncate's expanded deletes): the key stops existing and its
  attributes return to their defaults, so a re-created key starts from them again.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pyspark_jobs.gold.folds.events import KEY
from pyspark_jobs.gold.folds.inputs import FoldInputs
from pyspark_jobs.gold.folds.shared import (
    CHANGES_TYPE,
    IMAGE_TYPE,
    STATE_TYPE,
    as_net_state,
    drop_unchanged,
    project_image,
    with_specs,
)
from pyspark_jobs.gold.tigergraph_ops import apply_op


def _step(every_step: bool):
    def step(acc: Column, x: Column) -> Column:
        existed = acc["exists"]
        op = x["op"]
        categories, defaults = F.col("categories"), F.col("defaults")
        applied = F.map_zip_with(
            acc["image"],
            F.coalesce(x["changes"], F.create_map().cast(CHANGES_TYPE)),
            lambda k, old, chg: F.when(chg.isNull(), old).otherwise(
                apply_op(chg["op"], old, chg["value"], categories[k], existed)
            ),
        )
        ignored = (op == "insert_if_absent") & existed
        gone = op.isin("delete", "truncate")
        writes = op.isin("patch", "insert_if_absent")
        exists = F.when(gone, F.lit(False)).when(writes, F.lit(True)).otherwise(existed)
        image = (
            F.when(gone, defaults)
            .when(ignored, acc["image"])
            .when(writes, applied)
            .otherwise(acc["image"])
        )
        last = F.when(ignored, acc["last"]).otherwise(x)
        deleted_seq = F.when(gone, x["seq"]).otherwise(acc["deleted_seq"])
        state = F.struct(
            exists.alias("live"),
            F.when(exists, project_image(image, F.col("value_columns"))).alias("image"),
            last["seq"].alias("seq"),
            last["change_id"].alias("change_id"),
            last["source"].alias("source"),
            last["event_ts"].alias("event_ts"),
            F.when(~exists, deleted_seq).alias("deleted_seq"),
        )
        states = F.concat(acc["states"], F.array(state)) if every_step else F.array(state)
        return F.struct(
            exists.alias("exists"),
            image.alias("image"),
            last.alias("last"),
            deleted_seq.alias("deleted_seq"),
            states.alias("states"),
        )

    return step


def graph_states(history: DataFrame, specs: DataFrame, every_step: bool = True) -> DataFrame:
    """Each key's state after every event of its sorted history ``h`` (only the final
    state unless ``every_step``)."""
    keyed = with_specs(history, specs, "value_columns", "categories", "defaults")
    start = F.struct(
        F.lit(False).alias("exists"),
        F.col("defaults").cast(IMAGE_TYPE).alias("image"),
        F.col("h")[0].alias("last"),
        F.lit(None).cast("array<bigint>").alias("deleted_seq"),
        F.array().cast(f"array<{STATE_TYPE}>").alias("states"),
    )
    return keyed.select(*KEY, F.aggregate("h", start, _step(every_step))["states"].alias("states"))


def final_states(states: DataFrame) -> DataFrame:
    """Net states from the last element of each key's ``states``."""
    last = F.element_at("states", -1)
    return as_net_state(
        states.select(
            *KEY,
            last["live"].alias("_live"),
            last["image"].alias("_image"),
            last["seq"].alias("_seq"),
            last["change_id"].alias("_change_id"),
            last["source"].alias("_source"),
            last["event_ts"].alias("_event_ts"),
            F.lit(None).alias("_cell_ts"),
            last["deleted_seq"].alias("_tomb_seq"),
        )
    )


def fold_graph(inputs: FoldInputs) -> DataFrame:
    """Net state of every graph key a new change (or its cascade) touches, where it
    differs from gold."""
    assert inputs.histories is not None, "the graph fold re-folds from the change log"
    states = graph_states(inputs.histories, inputs.specs, every_step=False)
    return drop_unchanged(final_states(states), inputs)
