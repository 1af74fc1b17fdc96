"""Load the Delta snapshots a step will read, all at once.

A process reads each Delta table's log once, then works from the cached snapshot. Loaded
one table at a time (inside gold's folds and MERGEs, or as the gold gate names each
table), those loads (a log listing, a state reconstruction job, a file listing) run back
to back; they are independent, so a step loads them concurrently before it starts
(``spark.databricks.delta`` caches them per table for the session).
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from delta.tables import DeltaTable
from pyspark import inheritable_thread_target
from pyspark.sql import SparkSession

from pyspark_jobs.delta_log import holds_files

# Mostly waiting on the driver's Delta log work: a few overlap well on two cores.
LOAD_THREADS = 6


def load_snapshots(
    spark: SparkSession, tables: Iterable[str], unless_empty: Iterable[str] = ()
) -> None:
    """Bring the snapshot (and file list) of each named table up to date, concurrently;
    ``unless_empty``: more tables, each loaded only if its log says it holds files (for a
    step that neither scans nor merges into an empty one)."""
    always = set(tables)
    optional = set(unless_empty) - always
    names = sorted(always | optional)

    def load(name: str) -> None:
        if name not in optional or holds_files(spark, name):
            # `describe detail` reads the snapshot's state (file count and size): the same
            # state every later scan and MERGE of the table starts from.
            DeltaTable.forName(spark, name).detail().collect()

    # The loads' Spark jobs carry the caller's step name (``job_names``), not none.
    with ThreadPoolExecutor(max_workers=max(1, min(LOAD_THREADS, len(names)))) as pool:
        list(pool.map(inheritable_thread_target(load), names))
