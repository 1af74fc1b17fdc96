"""Names for the Spark jobs of a step, as the Spark UI and the event log show them."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from pyspark.sql import SparkSession

_DESCRIPTION = "spark.job.description"
A = TypeVar("A")
T = TypeVar("T")


@contextmanager
def named_jobs(spark: SparkSession, name: str) -> Iterator[None]:
    """Describe every Spark job this thread starts inside the block as ``name``, so a
    run's cost can be read per step from Spark's event log (``benchmarks.event_log``).
    Threads started inside the block name their jobs the same only if each task runs
    through ``in_callers_jobs`` or names its own."""
    context = spark.sparkContext
    before = context.getLocalProperty(_DESCRIPTION)
    context.setJobDescription(name)
    try:
        yield
    finally:
        context.setLocalProperty(_DESCRIPTION, before)  # type: ignore[arg-type]


def in_callers_jobs(spark: SparkSession, work: Callable[[A], T]) -> Callable[[A], T]:
    """``work`` for a pool's threads: each call starts from its own copy of the local
    properties of the thread that wraps it (its step name and job group among them).

    Not ``pyspark.inheritable_thread_target``: it hands every call the same copy, so
    calls running side by side wrote into one another's properties as Delta and Spark set
    and restore them (a gold gate's job descriptions grew to "Delta: " forty times over
    "read tables: Filtering files for query: Compute snapshot for version: N", repeated;
    the SQL execution id, one slot for all), and it warns on every call that no session
    was given for tags this project does not use.
    """
    context = spark.sparkContext._jsc.sc()
    caller = context.getLocalProperties().clone()

    def call(item: A) -> T:
        # Pinned threads (PySpark's default): this Python thread's own JVM thread.
        context.setLocalProperties(caller.clone())
        return work(item)

    return call


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
