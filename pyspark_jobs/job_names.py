"""Names for the Spark jobs of a step, as the Spark UI and the event log show them."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

_DESCRIPTION = "spark.job.description"


@contextmanager
def named_jobs(spark: SparkSession, name: str) -> Iterator[None]:
    """Describe every Spark job this thread starts inside the block as ``name``, so a
    run's cost can be read per step from Spark's event log (``benchmarks.event_log``).
    Threads started inside the block name their jobs the same only if each task copies
    the caller's local properties (``snapshots._on_pool``) or names its own."""
    context = spark.sparkContext
    before = context.getLocalProperty(_DESCRIPTION)
    context.setJobDescription(name)
    try:
        yield
    finally:
        context.setLocalProperty(_DESCRIPTION, before)  # type: ignore[arg-type]


@contextmanager
def counted_jobs(spark: SparkSession) -> Iterator[Callable[[], int]]:
    """Count the Spark jobs this thread starts inside the block, in a job group of its own
    (the status tracker keeps only the newest jobs: a count over the whole session's
    stops growing in a long session, one over a new group does not). For tests and
    benchmarks that measure a step's cost around it."""
    group = f"counted-{uuid.uuid4().hex}"
    context = spark.sparkContext
    context.setJobGroup(group, group)
    try:
        yield lambda: len(context.statusTracker().getJobIdsForGroup(group))
    finally:
        for key in ("spark.jobGroup.id", _DESCRIPTION):
            context.setLocalProperty(key, None)  # type: ignore[arg-type]
