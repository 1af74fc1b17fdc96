"""Frames computed once and kept, so the plans that read them start from small relations."""

from __future__ import annotations

from pyspark.sql import DataFrame

from pyspark_jobs.empty_frames import empty_frame


def materialized(frame: DataFrame) -> DataFrame:
    """``frame`` computed once and kept (memory, spilling to disk), its plan cut off.

    A frame the optimizer proves empty (it reads only empty local relations: a first
    run's gold rows and tombstones) is not computed but stays an empty local relation, so
    the plans that read it are simplified too: a checkpoint would be an RDD again."""
    plan = frame._jdf.queryExecution().optimizedPlan()
    if plan.getClass().getSimpleName() == "LocalRelation" and plan.data().isEmpty():
        return empty_frame(frame.sparkSession, frame.schema)
    return frame.localCheckpoint(eager=True)
