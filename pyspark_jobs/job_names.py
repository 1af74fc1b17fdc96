"""Names for the Spark jobs of a step, as the Spark UI and the event log show them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

_DESCRIPTION = "spark.job.description"


@contextmanager
def named_jobs(spark: SparkSession, name: str) -> Iterator[None]:
    """Describe every Spark job this thread starts inside the block as ``name``, so a
    run's cost can be read per step from Spark's event log (``benchmarks.event_log``).
    Threads started inside the block name their jobs the same only through
    ``pyspark.inheritable_thread_target``."""
    context = spark.sparkContext
    before = context.getLocalProperty(_DESCRIPTION)
    context.setJobDescription(name)
    try:
        yield
    finally:
        context.setLocalProperty(_DESCRIPTION, before)  # type: ignore[arg-type]
