"""Load the Delta snapshots a step will read, all at once.

A process reads each Delta table's log once, then works from the cached snapshot. Loaded
one table at a time (inside gold's folds and MERGEs, or as the gold gate names each
table), those loads (a log listing, a state reconstruction job, a file listing) run back
to back; they are independent, so a step loads them concurrently before it starts
(``spark.databricks.delta`` caches them per table for the session).

A step that reads many small tables in one query (the gold gate) goes further with
``read_tables``: each small table is loaded, planned and read on the pool, so the query
over them plans a few in-memory relations instead of a Delta scan per table, one after
the other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from pyspark.sql import DataFrame, SparkSession

from pyspark_jobs.delta_log import current_snapshot, holds_files
from pyspark_jobs.job_names import in_callers_jobs
from pyspark_jobs.materialize import materialized
from pyspark_jobs.small_inputs import all_small

# Mostly waiting on the driver's Delta log work: a few overlap well on two cores.
LOAD_THREADS = 6
T = TypeVar("T")


def load_snapshots(
    spark: SparkSession, tables: Iterable[str], unless_empty: Iterable[str] = ()
) -> None:
    """Bring the snapshot (and file list) of each named table up to date, concurrently;
    ``unless_empty``: more tables, each loaded only if its log says it holds files (for a
    step that neither scans nor merges into an empty one)."""
    always = set(tables)
    optional = set(unless_empty) - always

    def load(name: str) -> None:
        if name not in optional or holds_files(spark, name):
            _load(spark, name)

    _on_pool(spark, load, sorted(always | optional))


def read_tables(
    spark: SparkSession, reads: Mapping[str, Callable[[DataFrame], DataFrame]]
) -> dict[str, DataFrame]:
    """``read(spark.table(name))`` for each ``name -> read`` of ``reads``, concurrently.

    A small table's frame (``small_inputs.all_small``: by Delta's log) comes back
    materialized: its snapshot load, scan planning and read ran on the pool. A large
    table's comes back lazy, its snapshot loaded: reading it twice would cost more than
    planning its scan in the caller's query.
    """

    def read(name: str) -> DataFrame:
        if all_small(spark, [name]):
            return materialized(reads[name](spark.table(name)))
        _load(spark, name)
        return reads[name](spark.table(name))

    names = list(reads)
    return dict(zip(names, _on_pool(spark, read, names), strict=True))


def _load(spark: SparkSession, name: str) -> None:
    # The snapshot's file count is computed from its state (the state reconstruction
    # jobs): the same state every later scan and MERGE of the table starts from. Asked of
    # the table's log directly, not by `describe detail`: the same jobs without a command
    # planned and six metastore calls a table (docs/performance.md).
    current_snapshot(spark, name).numOfFiles()


def _on_pool(spark: SparkSession, work: Callable[[str], T], names: Sequence[str]) -> list[T]:
    """``work(name)`` for each name on the loading pool, in order; its Spark jobs carry
    the caller's step name (``job_names``)."""
    with ThreadPoolExecutor(max_workers=max(1, min(LOAD_THREADS, len(names)))) as pool:
        return list(pool.map(in_callers_jobs(spark, work), names))
