"""Locks so two runs of the same job on the same data refuse to overlap.

Two kinds, chosen by ``Settings.lock_mode``:

``host`` (a lake folder: the embedded default)
    An advisory ``fcntl`` lock on a file in the driver's ``_state/locks``. Taken before
    Spark starts, so a second run refuses before it boots a JVM that would block on the
    embedded Derby metastore. The kernel drops it when the holder dies, even by
    ``kill -9``. It only excludes processes of the same host.

``lake`` (a lake URI, or ``LAKEHOUSE_LOCKS=lake``: hosts that share the lake)
    A row per lock name in a Delta table in the lake (``<lake>/_state/lake_locks``),
    taken by a MERGE: a row is free when it is absent, released, or its lease has
    expired. Delta commits are optimistic: two hosts that take the same lock at once
    both read the table, both MERGE, and only one commit wins; the other fails with a
    concurrent-modification error, reads again and finds the winner's row. So the lock
    holds wherever Delta's own concurrent writes are safe, the same condition the
    pipeline's tables already need (on S3: Delta's DynamoDB log store; docs/deploy.md).
    A holder renews its lease from a thread; a holder that dies leaves a row that
    expires after ``Settings.lock_lease_seconds`` (default 10 minutes).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pyspark_jobs.settings import Settings

LAKE_LOCK_SCHEMA = (
    "name string, holder string, host string, pid int, acquired_at_ms bigint, expires_at_ms bigint"
)
# Attempts at a lake lock MERGE that lost a race before giving up (each loser re-reads and
# usually finds the winner's row at once, so this is only reached by a storm of releases).
_MERGE_ATTEMPTS = 8


class LockBusy(RuntimeError):
    """Another process holds the lock."""


def _lost_race() -> tuple[type[Exception], ...]:
    """Delta's errors for a commit that lost to a concurrent one. (Its Python classes do
    not share a base: ``DeltaConcurrentModificationException`` alone catches none.)"""
    from delta import exceptions as delta

    return (
        delta.DeltaConcurrentModificationException,
        delta.ConcurrentWriteException,
        delta.MetadataChangedException,
        delta.ProtocolChangedException,
        delta.ConcurrentAppendException,
        delta.ConcurrentDeleteReadException,
        delta.ConcurrentDeleteDeleteException,
        delta.ConcurrentTransactionException,
    )


@contextmanager
def exclusive_lock(path: Path, what: str) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` or raise ``LockBusy`` at once.

    The kernel drops the lock when the holder dies (even by ``kill -9``), so a crashed
    run never blocks the next one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            raise LockBusy(f"{what} is already running (pid {holder}, lock {path})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


# The file every process that opens the lake's embedded Derby metastore holds: the
# lakehouse commands that start Spark, and the Makefile's dbt targets (through flock(1)).
METASTORE_LOCK = "metastore.lock"


# Embedded-metastore locks this process holds, by lock file: taken once, kept until exit.
_HELD_FOR_PROCESS: dict[Path, ExitStack] = {}


def hold_embedded_metastore_lock(state_dir: Path, derby_dir: Path | None) -> None:
    """Take the lake's embedded-metastore lock for the rest of this process, or raise
    ``LockBusy`` at once.

    Derby admits one JVM: a second one fails deep in Hive's client after its JVM has
    started, naming neither the holder nor the way out. The JVM keeps Derby open until the
    process ends, so the lock is never given back earlier; a process that holds it already
    (commands run in-process one after another, as tests do) goes on.

    A process that opened the Derby database in ``derby_dir`` without this lock (a bare
    ``dbt``, not ``scripts/analyst_dbt.sh``) is refused the same way, by Derby's own lock;
    ``derby_dir`` is None when this process runs a Spark JVM already, which may hold it.
    """
    path = state_dir / "locks" / METASTORE_LOCK
    if path in _HELD_FOR_PROCESS:
        return
    held = ExitStack()
    try:
        held.enter_context(exclusive_lock(path, "a process on this lake's embedded metastore"))
        if derby_dir is not None and derby_stays_in_use(derby_dir):
            held.close()
            raise LockBusy(
                f"the lake's embedded metastore ({derby_dir}) is open in another process that "
                f"holds no lakehouse lock (a dbt run not started through scripts/analyst_dbt.sh "
                "or make dbt-*?)"
            )
        if derby_dir is not None and clear_unfinished_derby(derby_dir):
            print(
                f"lakehouse: removed {derby_dir}: a command was killed while Derby created it "
                "(no table was ever registered there); Derby creates it again now",
                file=sys.stderr,
            )
    except LockBusy as exc:
        raise LockBusy(
            f"{exc}; the embedded Derby metastore admits one Spark process at a time: wait "
            "for it, or use a shared metastore (docs/deploy.md)"
        ) from None
    _HELD_FOR_PROCESS[path] = held


def clear_unfinished_derby(derby_dir: Path) -> bool:
    """Remove the Derby database in ``derby_dir`` when its creation was cut off (the JVM
    killed in a lake's first seconds): True when it did; any other is left alone.

    Derby writes ``service.properties`` last when it creates a database and refuses to
    boot a folder without it ("Perhaps Derby was brought down in the middle of creating
    this database"), so such a folder never held a table, and left there it would fail
    every later command on the lake. Call it only while no other process has it open.
    """
    if not derby_dir.is_dir() or (derby_dir / "service.properties").exists():
        return False
    shutil.rmtree(derby_dir)
    return True


# The file a booted Derby database keeps locked (Java's FileChannel.tryLock: a POSIX
# record lock over the whole file) for as long as its JVM has it open.
_DERBY_LOCK = "dbex.lck"


# How long a Derby lock held by no lakehouse process may take to go away before a command
# refuses: a JVM whose Python process was killed ends on its own, about a second later.
DERBY_RELEASE_GRACE_SECONDS = 5.0


def derby_stays_in_use(derby_dir: Path, grace: float = DERBY_RELEASE_GRACE_SECONDS) -> bool:
    """Whether ``derby_in_use`` stays true for ``grace`` seconds."""
    deadline = time.monotonic() + grace
    while derby_in_use(derby_dir):
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.1)
    return False


def derby_in_use(derby_dir: Path) -> bool:
    """Whether another process has the Derby database in ``derby_dir`` open.

    Probes Derby's own lock with a POSIX lock of the same kind and lets it go at once, so
    the JVM this process starts next can take it. The probe opens no file that is not
    there: a database never booted is free.
    """
    try:
        fd = os.open(derby_dir / _DERBY_LOCK, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


class LakeLock:
    """Locks named ``names`` as rows of the Delta table at ``location``, held together.

    >>> lock = LakeLock(spark, "s3a://bucket/lake/_state/lake_locks", ["ingest-orders"],
    ...                 lease_seconds=600, what=lambda n: n)  # doctest: +SKIP
    >>> lock.acquire(); ...; lock.release()                     # doctest: +SKIP
    """

    def __init__(
        self,
        spark: SparkSession,
        location: str,
        names: Sequence[str],
        lease_seconds: float,
        what: Callable[[str], str],
        holder: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.spark = spark
        self.location = location
        self.names = sorted(set(names))
        self.lease_ms = int(lease_seconds * 1000)
        self.what = what
        self.holder = holder or uuid.uuid4().hex
        self.clock = clock

    def _table(self):  # -> DeltaTable
        from delta.tables import DeltaTable

        if not DeltaTable.isDeltaTable(self.spark, self.location):
            # The first lock of a lake creates the table (an empty append makes version 0;
            # a second host doing the same at that moment loses the race, harmlessly).
            empty = self.spark.createDataFrame([], LAKE_LOCK_SCHEMA)
            with suppress(*_lost_race()):
                empty.write.format("delta").mode("append").save(self.location)
        return DeltaTable.forPath(self.spark, self.location)

    def _rows(self, table) -> list:  # noqa: ANN001 - DeltaTable
        from pyspark.sql import functions as F

        return table.toDF().where(F.col("name").isin(self.names)).collect()

    def _busy(self, rows: list, now_ms: int) -> list:
        return [r for r in rows if r.holder != self.holder and r.expires_at_ms > now_ms]

    def _refuse(self, busy: list) -> LockBusy:
        row = busy[0]
        return LockBusy(
            f"{self.what(row.name)} is already running (host {row.host}, pid {row.pid}, "
            f"lake lock {self.location})"
        )

    def acquire(self) -> None:
        """Take every name, or raise ``LockBusy`` naming a live holder; all or none."""
        from pyspark.sql import functions as F

        table = self._table()
        for _ in range(_MERGE_ATTEMPTS):
            now_ms = int(self.clock() * 1000)
            busy = self._busy(self._rows(table), now_ms)
            if busy:
                raise self._refuse(busy)
            host, pid, expires_ms = socket.gethostname(), os.getpid(), now_ms + self.lease_ms
            mine = self.spark.createDataFrame(
                [(n, self.holder, host, pid, now_ms, expires_ms) for n in self.names],
                LAKE_LOCK_SCHEMA,
            )
            free = (F.col("t.expires_at_ms") <= F.lit(now_ms)) | (
                F.col("t.holder") == F.lit(self.holder)
            )
            try:
                (
                    table.alias("t")
                    .merge(mine.alias("s"), "t.name = s.name")
                    .whenMatchedUpdateAll(condition=free)
                    .whenNotMatchedInsertAll()
                    .execute()
                )
            except _lost_race():
                continue  # another host committed first: read again
            rows = self._rows(table)
            if all(r.holder == self.holder for r in rows) and len(rows) == len(self.names):
                return
            # Cannot happen while Delta detects the conflict; never hold half the names.
            self.release()
            raise self._refuse(self._busy(rows, now_ms) or rows)
        raise LockBusy(f"{self.what(self.names[0])}: lake lock {self.location} stays contended")

    def renew(self) -> None:
        """Push the lease of the held names forward (the holder's heartbeat)."""
        from pyspark.sql import functions as F

        table = self._table()
        expires = int(self.clock() * 1000) + self.lease_ms
        # Another lock changing at the same moment makes this beat fail: the next renews.
        with suppress(*_lost_race()):
            table.update(
                condition=(F.col("holder") == F.lit(self.holder)) & F.col("name").isin(self.names),
                set={"expires_at_ms": F.lit(expires)},
            )

    def release(self) -> None:
        """Delete the rows this holder has (rows taken over by others stay)."""
        from pyspark.sql import functions as F

        table = self._table()
        condition = (F.col("holder") == F.lit(self.holder)) & F.col("name").isin(self.names)
        for _ in range(_MERGE_ATTEMPTS):
            try:
                table.delete(condition)
                return
            except _lost_race():
                continue

    @contextmanager
    def held(self) -> Iterator[None]:
        """Acquire, renew every third of the lease from a thread, release at the end."""
        self.acquire()
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.lease_ms / 3000):
                # A failed beat (storage hiccup) is retried at the next one.
                with suppress(Exception):
                    self.renew()

        heartbeat = threading.Thread(target=beat, name="lake-lock-heartbeat", daemon=True)
        heartbeat.start()
        try:
            yield
        finally:
            stop.set()
            heartbeat.join()
            self.release()


@contextmanager
def named_locks(
    settings: Settings,
    names: Sequence[str],
    what: Callable[[str], str],
    spark: Callable[[], SparkSession],
) -> Iterator[None]:
    """Hold every lock of ``names`` the way ``settings.lock_mode`` says, or raise
    ``LockBusy`` at once.

    ``spark`` gives the session on demand: host locks never call it, so they are taken
    before a JVM starts.
    """
    if settings.lock_mode == "host":
        with ExitStack() as locks:
            for name in names:
                locks.enter_context(
                    exclusive_lock(settings.state_dir / "locks" / f"{name}.lock", what(name))
                )
            yield
        return
    lock = LakeLock(spark(), settings.lock_table_location, names, settings.lock_lease_seconds, what)
    with lock.held():
        yield
