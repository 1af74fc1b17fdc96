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
from pyspark.sql import SparkSession

from pyspark_jobs.delta_log import holds_files

# Mostly waiting on the driver's Delta log work: a few overlap well on two cores.
LOAD_THREADS = 6


def load_snapshots(spark: SparkSession, tables: Iterable[str], skip_empty: bool = False) -> None:
    """Bring the snapshot (and file list) of each named table up to date, concurrently;
    ``skip_empty``: not of a table whose log says it holds no file (for a step that will
    neither scan nor merge into such a table)."""
    names = sorted(set(tables))

    def load(name: str) -> None:
        if not skip_empty or holds_files(spark, name):
            # `describe detail` reads the snapshot's state (file count and size): the same
            # state every later scan and MERGE of the table starts from.
            DeltaTable.forName(spark, name).detail().collect()

    with ThreadPoolExecutor(max_workers=max(1, min(LOAD_THREADS, len(names)))) as pool:
        list(pool.map(load, names))
