"""Locks that hold across hosts: rows of a Delta table in the lake, taken by MERGE; and the
probe of the embedded Derby metastore's own lock.

Two holders here are two ``LakeLock`` objects with their own holder ids, as two hosts
would be; the lock table sits behind a ``file://`` URI, as a shared lake does.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pyspark_jobs.locks import (
    LakeLock,
    LockBusy,
    derby_in_use,
    derby_stays_in_use,
    hold_embedded_metastore_lock,
    named_locks,
)
from pyspark_jobs.settings import DEFAULT_CONFIG, Settings
from pyspark_jobs.storage import read_text, write_once


def what(name: str) -> str:
    return f"an ingest of {name!r}"


def lake_lock(spark: SparkSession, location: str, names: list[str], **kwargs) -> LakeLock:
    return LakeLock(spark, location, names, lease_seconds=600, what=what, **kwargs)


def holders(spark: SparkSession, location: str) -> dict[str, str]:
    return {r.name: r.holder for r in spark.read.format("delta").load(location).collect()}


def test_a_second_holder_is_refused_until_the_first_releases(spark: SparkSession, tmp_path: Path):
    location = (tmp_path / "locks").as_uri()
    first = lake_lock(spark, location, ["ingest-a", "ingest-b"], holder="host-1")
    second = lake_lock(spark, location, ["ingest-b"], holder="host-2")
    first.acquire()
    with pytest.raises(LockBusy, match=r"an ingest of 'ingest-b' is already running \(host "):
        second.acquire()
    assert holders(spark, location) == {"ingest-a": "host-1", "ingest-b": "host-1"}
    first.release()
    second.acquire()
    assert holders(spark, location) == {"ingest-b": "host-2"}


def test_all_or_none(spark: SparkSession, tmp_path: Path):
    location = (tmp_path / "locks").as_uri()
    lake_lock(spark, location, ["ingest-a"], holder="host-1").acquire()
    with pytest.raises(LockBusy):
        lake_lock(spark, location, ["ingest-b", "ingest-a"], holder="host-2").acquire()
    assert holders(spark, location) == {"ingest-a": "host-1"}


def test_a_dead_holders_lock_expires_and_its_late_release_frees_nothing(
    spark: SparkSession, tmp_path: Path
):
    location = (tmp_path / "locks").as_uri()
    now = 1_800_000_000.0
    crashed = lake_lock(spark, location, ["ingest-a"], holder="crashed", clock=lambda: now)
    crashed.acquire()
    early = lake_lock(spark, location, ["ingest-a"], holder="early", clock=lambda: now + 599)
    with pytest.raises(LockBusy):
        early.acquire()
    late = lake_lock(spark, location, ["ingest-a"], holder="late", clock=lambda: now + 601)
    late.acquire()
    crashed.release()
    assert holders(spark, location) == {"ingest-a": "late"}


def test_renewing_keeps_the_lease(spark: SparkSession, tmp_path: Path):
    location = (tmp_path / "locks").as_uri()
    clock = [1_800_000_000.0]
    holder = lake_lock(spark, location, ["ingest-a"], holder="alive", clock=lambda: clock[0])
    holder.acquire()
    clock[0] += 500
    holder.renew()
    other = lake_lock(spark, location, ["ingest-a"], holder="other", clock=lambda: clock[0] + 200)
    with pytest.raises(LockBusy):
        other.acquire()


def test_two_hosts_racing_for_one_lock_one_wins(spark: SparkSession, tmp_path: Path):
    location = (tmp_path / "locks").as_uri()
    lake_lock(spark, location, ["warm-up"]).acquire()  # the table exists: a pure MERGE race
    start = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def contend(holder: str) -> None:
        lock = lake_lock(spark, location, ["ingest-a"], holder=holder)
        start.wait()
        try:
            lock.acquire()
            outcomes[holder] = "won"
        except LockBusy:
            outcomes[holder] = "refused"

    threads = [threading.Thread(target=contend, args=(h,)) for h in ("host-1", "host-2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes.values()) == ["refused", "won"]
    winner = next(h for h, outcome in outcomes.items() if outcome == "won")
    assert holders(spark, location)["ingest-a"] == winner


def test_host_locks_are_taken_without_a_session(tmp_path: Path):
    settings = Settings(tmp_path / "lake", "local[1]", DEFAULT_CONFIG)

    def no_session() -> SparkSession:
        raise AssertionError("host locks must not start Spark")

    busy = pytest.raises(LockBusy, match="an ingest of 'ingest-a' is already running")
    held = named_locks(settings, ["ingest-a"], what, no_session)
    with held, busy, named_locks(settings, ["ingest-a"], what, no_session):
        pass


def test_a_uri_lake_takes_lake_locks(spark: SparkSession, tmp_path: Path):
    settings = Settings((tmp_path / "lake").as_uri(), "local[1]", DEFAULT_CONFIG)
    with named_locks(settings, ["ingest-a"], what, lambda: spark):
        assert holders(spark, settings.lock_table_location).keys() == {"ingest-a"}
        with pytest.raises(LockBusy), named_locks(settings, ["ingest-a"], what, lambda: spark):
            pass
    assert holders(spark, settings.lock_table_location) == {}


@pytest.mark.parametrize("as_uri", [False, True], ids=["path", "file-uri"])
def test_small_files_are_written_once(spark: SparkSession, tmp_path: Path, as_uri: bool):
    target = tmp_path / "checkpoint" / "lakehouse_app_id"
    location = target.as_uri() if as_uri else str(target)
    assert read_text(spark, location) is None
    assert write_once(spark, location, "first")
    assert not write_once(spark, location, "second")
    assert read_text(spark, location) == "first"
    assert target.read_text() == "first"


def _hold_posix_lock(lock: Path, release_after: float | None = None) -> subprocess.Popen[str]:
    """Another process holding a POSIX lock on ``lock`` (as Derby holds dbex.lck), once it
    has printed ``held``; it lets go after ``release_after`` seconds, else when its stdin
    closes."""
    wait = "sys.stdin.read()" if release_after is None else f"time.sleep({release_after})"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(lock)!r}, os.O_RDWR)\n"
            "fcntl.lockf(fd, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            f"{wait}\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_derby_in_use_sees_a_posix_lock_of_another_process_on_dbex_lck(tmp_path: Path):
    # Derby holds dbex.lck with Java's FileChannel.tryLock: a POSIX lock over the file.
    assert not derby_in_use(tmp_path)  # never booted: no lock file
    lock = tmp_path / "dbex.lck"
    lock.write_bytes(b"")
    assert not derby_in_use(tmp_path)  # left behind by a JVM that ended
    holder = _hold_posix_lock(lock)
    try:
        assert derby_in_use(tmp_path)
        assert derby_in_use(tmp_path)  # the probe let go of what it did not take
    finally:
        holder.communicate("")
    assert not derby_in_use(tmp_path)


def test_a_derby_lock_let_go_within_the_grace_does_not_refuse(tmp_path: Path):
    """A JVM whose Python process was killed ends on its own a moment later: a command
    started right then waits for it instead of refusing; a holder that stays is refused
    once the grace is over."""
    lock = tmp_path / "dbex.lck"
    lock.write_bytes(b"")
    leaving = _hold_posix_lock(lock, release_after=1.0)
    started = time.monotonic()
    assert not derby_stays_in_use(tmp_path, grace=10.0)
    assert 0.5 < time.monotonic() - started < 10.0
    leaving.wait()
    staying = _hold_posix_lock(lock)
    try:
        started = time.monotonic()
        assert derby_stays_in_use(tmp_path, grace=1.0)
        assert 1.0 <= time.monotonic() - started < 5.0
    finally:
        staying.communicate("")


def test_a_metastore_cut_off_while_derby_created_it_is_created_again(tmp_path: Path):
    """A lake's first command killed while Derby was creating its database leaves a folder
    Derby refuses to boot ever after (no `service.properties`, written last): the next
    command removes it, since no table was registered there; a created one stays."""
    derby = tmp_path / "lake" / "metastore_db"
    for name in ("log/log1.dat", "log/log.ctrl", "seg0/c20.dat", "db.lck", "dbex.lck"):
        (derby / name).parent.mkdir(parents=True, exist_ok=True)
        (derby / name).write_bytes(b"\0" * 16)

    hold_embedded_metastore_lock(tmp_path / "state-1", derby)
    assert not derby.exists()

    (derby / "seg0").mkdir(parents=True)
    (derby / "service.properties").write_text("derby.storage.databaseName=metastore_db\n")
    (derby / "seg0" / "c20.dat").write_bytes(b"\0" * 16)
    hold_embedded_metastore_lock(tmp_path / "state-2", derby)
    assert (derby / "service.properties").exists() and (derby / "seg0" / "c20.dat").exists()
