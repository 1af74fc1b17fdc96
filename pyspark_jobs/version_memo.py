"""Values read from a Delta table, kept in this process while the table's log says the
table is as it was when they were read.

A pipeline cycle reads a few small state tables whatever it has to do: gold's progress,
silver's last build. Each read is a Spark query (planned, run, and after the last
cycle's commit the table's new snapshot rebuilt first): 0.6 to 0.7 s each in a warm
cycle (docs/performance.md). Their value only changes with a commit, and most of those
commits are the pipeline's own appends, whose effect it knows. So a value is kept with
the commit it was read at (``commit_key``), handed out again while the table's latest
commit is that one (one log listing, no Spark job), and carried over the pipeline's own
append (``own_commit``) when that append was the only commit in between.

A commit is named by the table's location, its id, its version and its timestamp: a
table dropped and created again, a copy of the lake elsewhere, or the same version
written again by another history (a lake restored from a copy) never compare equal.
Anything else (a failed write, another writer's commit, ``lakehouse maintain``) drops the
value, and the next read computes it again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from pyspark.sql import SparkSession

from pyspark_jobs.delta_log import current_snapshot

T = TypeVar("T")


@dataclass(frozen=True)
class CommitKey:
    """One commit of one table: where its log is, its id, its version and its time."""

    location: str
    table_id: str
    version: int
    timestamp: int

    def follows(self, other: CommitKey) -> bool:
        """Whether this commit is the next one of ``other``'s table."""
        return _same_table(self, other) and self.version == other.version + 1


def _same_table(one: CommitKey, other: CommitKey) -> bool:
    return (one.location, one.table_id) == (other.location, other.table_id)


def _behind(kept: CommitKey, now: CommitKey) -> bool:
    return _same_table(kept, now) and kept.version < now.version


def commit_key(spark: SparkSession, table: str) -> CommitKey:
    """The latest commit of ``table`` (its log listed, no Spark job)."""
    snapshot = current_snapshot(spark, table)
    return CommitKey(
        location=str(snapshot.path().toString()),
        table_id=str(snapshot.metadata().id()),
        version=int(snapshot.version()),
        timestamp=int(snapshot.timestamp()),
    )


_held: dict[tuple[str, str], tuple[CommitKey, Any]] = {}
_lock = threading.Lock()


def memoized(
    spark: SparkSession,
    table: str,
    name: str,
    read: Callable[[], T],
    catch_up: Callable[[T, CommitKey, CommitKey], T | None] | None = None,
) -> T:
    """``read()``, a value computed from ``table`` (``name`` tells the values of one table
    apart), or the value kept from an earlier call when the table has had no commit since
    it was read. ``catch_up(value, kept_at, now)``, when given, brings a value kept at an
    earlier commit of the same table up to the latest one from the commits in between
    (None when it cannot: ``read()`` then runs). Values are shared: callers must not
    change them."""
    key = commit_key(spark, table)
    with _lock:
        held = _held.get((table, name))
    if held is not None and held[0] == key:
        return held[1]
    value = None
    if held is not None and catch_up is not None and _behind(held[0], key):
        value = catch_up(held[1], held[0], key)
    if value is None:
        value = read()
        if commit_key(spark, table) != key:
            # A commit landed while it read: the value is of some commit after ``key``,
            # which one is not known, so it is not kept.
            return value
    with _lock:
        _held[(table, name)] = (key, value)
    return value


@contextmanager
def own_commit(
    spark: SparkSession, table: str, name: str, update: Callable[[Any], Any]
) -> Iterator[None]:
    """Around one commit of the caller to ``table``: the value kept for ``name`` becomes
    ``update(value)`` when the block's commit directly follows the one it was read at;
    otherwise (another commit in between, no commit, an error) it is dropped."""
    with _lock:
        held = _held.pop((table, name), None)
    if held is None:
        yield
        return
    before = commit_key(spark, table)
    yield
    if held[0] != before:
        return
    after = commit_key(spark, table)
    if after.follows(before):
        with _lock:
            _held[(table, name)] = (after, update(held[1]))


def forget_all() -> None:
    """Drop every kept value (a test that rewrites a table's log by hand)."""
    with _lock:
        _held.clear()
