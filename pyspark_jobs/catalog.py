"""Whether the catalog has a table, asked of the session catalog alone; and, for one
pipeline run, the catalog's answers kept.

``spark.catalog.tableExists`` answers by loading the table (Spark's ``getTable``): for a
Delta table its catalog entry, its log listed and its snapshot brought up to date, about
22 ms a table in a warm session on 2 cores. The session catalog's own lookup is one
metastore call, about 3 ms. A run asks this of every gold table several times (their
layouts, whether a step may run interpreted, the gates' inputs), changed or not: over 24
tables, 0.3 s of gold's 1.6 s when nothing is new, alone in a warm session (docs/gold.md).

The answer is the catalog's: a table registered there exists even if its folder is gone
(reading it then fails with Delta's own error, where ``spark.catalog.tableExists`` raised
one itself). Temporary views are not tables here: every name asked is a schema's table.

Within ``lookups_kept`` (one pipeline run), a table found is not looked up again, and
what was derived from its catalog entry (its JVM ``DeltaLog``, ``kept_lookup``) is kept:
a one-table warm cycle asks the metastore about 400 times, most of them the same
questions again (docs/performance.md). The run holds the pipeline's locks, so its tables
are dropped only by itself: where it drops one (``forget_table``) or lets dbt run
(``forget_lookups``), the kept answers go. Nothing is kept past the run: a table another
process drops between two cycles of ``lakehouse run --every`` is looked up again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from pyspark.sql import SparkSession

T = TypeVar("T")

_lock = threading.Lock()
_runs_open = 0
# (table, what) -> the value looked up; a table found is kept as (table, "exists") -> True.
_kept: dict[tuple[str, str], Any] = {}


def _key(name: str) -> str:
    # The metastore's names are lower case, and a quoted name is the same table.
    return name.replace("`", "").lower()


def table_identifier(spark: SparkSession, name: str) -> Any:
    """The JVM ``TableIdentifier`` of ``name`` (``schema.table``), parsed as SQL names it."""
    return spark._jsparkSession.sessionState().sqlParser().parseTableIdentifier(name)


def table_exists(spark: SparkSession, name: str) -> bool:
    """Whether the session catalog has table (or view) ``name`` (``schema.table``)."""
    with _lock:
        if _runs_open and (_key(name), "exists") in _kept:
            return True
    state = spark._jsparkSession.sessionState()
    found = bool(state.catalog().tableExists(table_identifier(spark, name)))
    if found:
        # Only a table found is kept: the run may yet create one that is missing.
        kept_lookup(name, "exists", lambda: True)
    return found


def kept_lookup(name: str, what: str, look_up: Callable[[], T]) -> T:
    """``look_up()``, something read from table ``name``'s catalog entry (``what`` tells
    such things apart); within ``lookups_kept``, the value an earlier call returned."""
    key = (_key(name), what)
    with _lock:
        if _runs_open and key in _kept:
            return _kept[key]
    value = look_up()
    with _lock:
        if _runs_open:
            _kept[key] = value
    return value


def forget_table(name: str) -> None:
    """Drop what is kept of table ``name``: call after dropping it."""
    with _lock:
        for key in [k for k in _kept if k[0] == _key(name)]:
            del _kept[key]


def forget_lookups() -> None:
    """Drop everything kept (after code this project does not own ran on the catalog)."""
    with _lock:
        _kept.clear()


@contextmanager
def lookups_kept() -> Iterator[None]:
    """Keep the catalog's answers within the block (one pipeline run; blocks may nest and
    run on several threads): all are dropped when the outermost block ends."""
    global _runs_open
    with _lock:
        _runs_open += 1
    try:
        yield
    finally:
        with _lock:
            _runs_open -= 1
            if not _runs_open:
                _kept.clear()
