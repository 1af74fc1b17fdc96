"""How many Spark jobs the shared session has run: a step's cost, read around it."""

from __future__ import annotations

from pyspark.sql import SparkSession


def jobs_so_far(spark: SparkSession) -> int:
    """Spark jobs started so far outside any job group (the pipeline sets none)."""
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))
