"""A landing source with nothing new starts no query; nothing landed is ever skipped."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from pyspark_jobs.bronze.ingest import ingest
from pyspark_jobs.bronze.landing_listing import (
    SIGNATURE_FILE,
    list_landing,
    nothing_new,
    record_signature,
)
from pyspark_jobs.settings import Settings, join_location
from tests.bronze.conftest import bronze_rows, landing_config, record_line

# --- the signature alone (no Spark) ---


def _land(folder: Path, name: str, offset: int) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(record_line("db.t", 0, offset, {"n": offset}) + "\n")
    return path


def signature(folder: Path) -> str:
    listing = list_landing(folder)
    assert listing is not None
    return listing.signature


def test_signature_changes_with_the_files_the_reader_reads_and_only_those(
    tmp_path: Path,
) -> None:
    landing = tmp_path / "landing"
    first = _land(landing, "a.jsonl", 0)
    before = signature(landing)
    assert signature(landing) == before  # same files, same signature

    # files the reader ignores: other names, a producer's temporary name before its rename
    (landing / "notes.txt").write_text("not a landing file\n")
    (landing / "b.jsonl.tmp").write_text("being written\n")
    assert signature(landing) == before

    nested = _land(landing, "2024/01/c.jsonl", 1)  # read recursively
    with_nested = signature(landing)
    assert with_nested != before
    nested.unlink()
    assert signature(landing) == before

    stat = first.stat()
    os.utime(first, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))  # touched
    touched = signature(landing)
    assert touched != before
    with first.open("a") as out:  # grown, mtime put back
        out.write(record_line("db.t", 0, 9, {"n": 9}) + "\n")
    os.utime(first, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert signature(landing) not in (before, touched)

    # the same files in another folder are other files to the reader
    copy = tmp_path / "copy"
    shutil.copytree(landing, copy)  # copies mtimes too
    assert signature(copy) != signature(landing)


def test_only_a_local_checkpoint_at_rest_with_the_same_signature_has_nothing_new(
    tmp_path: Path,
) -> None:
    checkpoint = str(tmp_path / "checkpoint")
    assert not nothing_new(checkpoint, "abc")  # no checkpoint yet

    os.makedirs(checkpoint)
    record_signature(checkpoint, "abc")
    assert nothing_new(checkpoint, "abc")
    assert not nothing_new(checkpoint, "abd")
    assert sorted(os.listdir(checkpoint)) == [SIGNATURE_FILE]  # written aside, renamed in

    # batch 3 planned but not committed: a restarted query would replay it
    for log, batches in (("offsets", [2, 3]), ("commits", [2])):
        os.makedirs(os.path.join(checkpoint, log))
        for batch in batches:
            Path(checkpoint, log, str(batch)).write_text("v1\n")
        Path(checkpoint, log, f".{batches[-1]}.crc").write_text("")
    assert not nothing_new(checkpoint, "abc")
    Path(checkpoint, "commits", "3").write_text("v1\n")
    assert nothing_new(checkpoint, "abc")

    # a checkpoint that is a URI is never judged, nor written
    uri = f"file://{tmp_path}/remote"
    record_signature(uri, "abc")
    assert not (tmp_path / "remote").exists()
    assert not nothing_new(uri, "abc")


# --- ingest with real Spark ---


class _QueriesStarted(StreamingQueryListener):
    """The names of the streaming queries started while it listens."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def onQueryStarted(self, event: object) -> None:
        # Called synchronously with writeStream.start(): seen before start() returns.
        self.names.append(str(getattr(event, "name", "")))

    def onQueryProgress(self, event: object) -> None:
        pass

    def onQueryIdle(self, event: object) -> None:
        pass

    def onQueryTerminated(self, event: object) -> None:
        pass


@pytest.fixture
def started(spark: SparkSession) -> Iterator[_QueriesStarted]:
    listener = _QueriesStarted()
    spark.streams.addListener(listener)
    yield listener
    spark.streams.removeListener(listener)


def _raw_version(spark: SparkSession) -> int:
    return int(spark.sql("describe history bronze.cdc_raw").agg({"version": "max"}).first()[0])


def test_nothing_new_starts_no_query_and_a_new_file_lands_once(
    spark: SparkSession, empty_lake: Settings, tmp_path: Path, started: _QueriesStarted
) -> None:
    config, landing = landing_config(tmp_path)
    _land(landing, "a.jsonl", 0)
    logged: list[str] = []

    [first] = ingest(spark, empty_lake, config, log=logged.append)
    assert (first.skipped, first.read) == (False, 1)
    assert started.names == ["bronze_files"]
    rows, version = bronze_rows(spark, "files"), _raw_version(spark)

    # nothing new: no query, nothing read, bronze untouched
    logged.clear()
    [idle] = ingest(spark, empty_lake, config, log=logged.append)
    assert (idle.skipped, idle.read, len(idle.batches)) == (True, 0, 0)
    assert logged == ["bronze files: no new landing files, stream not started"]
    assert started.names == ["bronze_files"]
    assert (bronze_rows(spark, "files"), _raw_version(spark)) == (rows, version)

    # a new file: the query runs and lands it once; then idle again
    _land(landing, "sub/b.jsonl", 1)
    [more] = ingest(spark, empty_lake, config, log=lambda _: None)
    assert (more.skipped, more.read, more.landed) == (False, 1, 1)
    [again] = ingest(spark, empty_lake, config, log=lambda _: None)
    assert again.skipped
    assert started.names == ["bronze_files", "bronze_files"]
    assert bronze_rows(spark, "files") == [
        ("db.t", 0, 0, None, '{"n":0}'),
        ("db.t", 0, 1, None, '{"n":1}'),
    ]

    # resetting the checkpoint (a deliberate re-ingest) drops the stored listing with it
    shutil.rmtree(join_location(empty_lake.checkpoint_dir, "bronze", "files"))
    [reread] = ingest(spark, empty_lake, config, log=lambda _: None)
    assert (reread.skipped, reread.read) == (False, 2)


def test_a_file_landing_during_a_run_is_read_by_the_next_run(
    spark: SparkSession, empty_lake: Settings, tmp_path: Path
) -> None:
    config, landing = landing_config(tmp_path)
    _land(landing, "a.jsonl", 0)

    def land_late(line: str) -> None:
        # After batch 0 was planned (so after the query listed the folder) and before
        # ingest returns and stores the listing: this run's query cannot read it.
        if ": batch 0:" in line:
            _land(landing, "late.jsonl", 1)

    [first] = ingest(spark, empty_lake, config, log=land_late)
    assert first.read == 1
    assert (landing / "late.jsonl").exists()
    assert [offset for _, _, offset, _, _ in bronze_rows(spark, "files")] == [0]

    # the stored listing is the one taken before the query started: late.jsonl is new
    [second] = ingest(spark, empty_lake, config, log=lambda _: None)
    assert (second.skipped, second.read) == (False, 1)
    [third] = ingest(spark, empty_lake, config, log=lambda _: None)
    assert third.skipped
    assert [offset for _, _, offset, _, _ in bronze_rows(spark, "files")] == [0, 1]


def test_a_run_stopped_on_request_or_every_stores_nothing_and_skips_nothing(
    spark: SparkSession, empty_lake: Settings, tmp_path: Path, started: _QueriesStarted
) -> None:
    config, landing = landing_config(tmp_path)
    _land(landing, "a.jsonl", 0)
    stored = Path(join_location(empty_lake.checkpoint_dir, "bronze", "files"), SIGNATURE_FILE)
    stop = threading.Event()
    stop.set()  # its query may end before reading everything: nothing to store

    ingest(spark, empty_lake, config, log=lambda _: None, stop=stop)
    assert not stored.exists()

    [caught_up] = ingest(spark, empty_lake, config, log=lambda _: None)
    assert not caught_up.skipped
    assert stored.exists()

    # --every keeps its query running for files still to come: it always starts one
    started.names.clear()
    [every] = ingest(spark, empty_lake, config, every_seconds=60, log=lambda _: None, stop=stop)
    assert not every.skipped
    assert started.names == ["bronze_files"]
    assert bronze_rows(spark, "files") == [("db.t", 0, 0, None, '{"n":0}')]
