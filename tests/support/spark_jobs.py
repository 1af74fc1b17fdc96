"""How many Spark jobs a step of the shared session runs: its cost, read around it."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession


@contextmanager
def counted_jobs(spark: SparkSession) -> Iterator[Callable[[], int]]:
    """Count the Spark jobs this thread starts inside the block, in a job group of its own
    (the status tracker keeps only the newest jobs: a count over the whole session's
    stops growing in a long test session, one over a new group does not)."""
    group = f"counted-{uuid.uuid4().hex}"
    context = spark.sparkContext
    context.setJobGroup(group, group)
    try:
        yield lambda: len(context.statusTracker().getJobIdsForGroup(group))
    finally:
        for key in ("spark.jobGroup.id", "spark.job.description"):
            context.setLocalProperty(key, None)  # type: ignore[arg-type]
