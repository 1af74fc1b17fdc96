"""How an entity-patch key's ordered history folds into its document (ops do not commute).

Keys are re-folded from their full history, as for TigerGraph. JSON patching at arbitrary
paths has no Spark built-in and Python UDFs cannot run inside ``aggregate``, so one small
Python UDF (``document_patch.document_steps``) walks a key's sorted events and returns the
document after each; Spark builds the states from its output.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from pyspark_jobs.gold.document_patch import document_steps
from pyspark_jobs.gold.folds.events import KEY
from pyspark_jobs.gold.folds.graph import final_states
from pyspark_jobs.gold.folds.inputs import FoldInputs
from pyspark_jobs.gold.folds.shared import drop_unchanged, project_image, with_specs

_STEPS = ArrayType(
    StructType(
        [
            StructField("exists", BooleanType()),
            StructField("image", MapType(StringType(), StringType())),
        ]
    )
)


def _steps(history: list, every_step: bool) -> list:
    steps = document_steps(history)
    return steps if every_step else steps[-1:]


_steps_udf = F.udf(_steps, _STEPS, useArrow=False)


def document_states(history: DataFrame, specs: DataFrame, every_step: bool = True) -> DataFrame:
    """Each key's state after every event of its sorted history ``h`` (only the final
    state unless ``every_step``)."""
    keyed = with_specs(history, specs, "value_columns").withColumn(
        "_steps", _steps_udf("h", F.lit(every_step))
    )
    # The events the steps belong to: all of them, or the last one.
    events = F.col("h") if every_step else F.slice("h", -1, 1)
    return keyed.select(
        *KEY,
        F.zip_with(
            events,
            "_steps",
            lambda e, s: F.struct(
                s["exists"].alias("live"),
                F.when(s["exists"], project_image(s["image"], F.col("value_columns"))).alias(
                    "image"
                ),
                e["seq"].alias("seq"),
                e["change_id"].alias("change_id"),
                e["source"].alias("source"),
                e["event_ts"].alias("event_ts"),
                F.when(~s["exists"], e["seq"]).alias("deleted_seq"),
            ),
        ).alias("states"),
    )


def fold_documents(inputs: FoldInputs) -> DataFrame:
    """Net state of every document a new change touches, where it differs from gold."""
    assert inputs.histories is not None, "the document fold re-folds from the change log"
    states = document_states(inputs.histories, inputs.specs, every_step=False)
    return drop_unchanged(final_states(states), inputs)
