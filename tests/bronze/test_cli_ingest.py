"""``lakehouse ingest`` as a process: exit codes, one-line failures, --every, concurrency."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from pyspark.sql import SparkSession

from pyspark_jobs.settings import PROJECT_ROOT
from tests.bronze.conftest import record_line, write_config
from tests.bronze.processes import Lakehouse
from tests.support.kafka_broker import free_ports


def _raw_rows(spark: SparkSession, lake: Path) -> list[tuple]:
    raw = spark.read.format("delta").load(str(lake / "warehouse" / "bronze.db" / "cdc_raw"))
    return sorted(tuple(r) for r in raw.select("source", "offset", "value").collect())


def _last_error(proc: Lakehouse) -> str:
    ours = [line for line in proc.errors if line.startswith("lakehouse")]
    assert len(ours) == 1, proc.errors[-10:]
    return ours[0]


def test_every_lands_new_files_refuses_a_second_ingest_and_stops_on_sigterm(
    spark: SparkSession, tmp_path: Path
) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "a.jsonl").write_text(record_line("db.t", 0, 0, {"n": 0}) + "\n")
    config = write_config(tmp_path, [{"name": "files", "landing": str(landing)}])
    lake = tmp_path / "lake"

    running = Lakehouse(lake, config, "ingest", "--every", "2")
    try:
        assert running.wait_for(lambda line: "files: batch 0: read 1, landed 1" in line, 180)

        # a second ingest of the same source refuses at once, before starting any JVM
        started = time.monotonic()
        second = Lakehouse(lake, config, "ingest", "--source", "files")
        assert second.finish(timeout=30) == 3
        assert time.monotonic() - started < 10
        assert _last_error(second).startswith(
            "lakehouse: an ingest of source 'files' is already running (pid "
        )

        # On the embedded metastore one Spark process at a time: a gold run and an
        # analyst's dbt refuse at once, naming the holder, and the ingest goes on.
        started = time.monotonic()
        gold = Lakehouse(lake, config, "gold")
        assert gold.finish(timeout=30) == 3
        assert time.monotonic() - started < 10
        assert _last_error(gold).startswith(
            f"lakehouse: a process on this lake's embedded metastore is already running "
            f"(pid {running.proc.pid}, lock {lake}/_state/locks/metastore.lock); "
        )
        dbt = _analyst_dbt(lake, "run")
        assert dbt.returncode == 3, dbt.stderr
        assert f"(pid {running.proc.pid}, lock {lake}/_state/locks/metastore.lock)" in dbt.stderr

        # a file added while it runs lands with the next trigger
        (landing / "b.jsonl").write_text(record_line("db.t", 0, 1, {"n": 1}) + "\n")
        assert running.wait_for(lambda line: "files: batch 1: read 1, landed 1" in line, 60)
    finally:
        running.proc.send_signal(signal.SIGTERM)
        code = running.finish(timeout=60)
    assert code == 0, running.errors[-10:]
    assert "bronze: stop requested, stopping after the batch in flight" in running.lines
    assert "bronze files: 2 batches, read 2, landed 2, quarantined 0" in running.lines

    # caught up: a plain run reads nothing and exits 0
    again = Lakehouse(lake, config, "ingest")
    assert again.finish(timeout=180) == 0, again.errors[-10:]
    assert "bronze files: 0 batches, read 0, landed 0, quarantined 0" in again.lines
    assert _raw_rows(spark, lake) == [("files", 0, '{"n":0}'), ("files", 1, '{"n":1}')]


def _analyst_dbt(lake: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PROJECT_ROOT / "scripts" / "analyst_dbt.sh"), *args],
        env={**os.environ, "LAKEHOUSE_ROOT": str(lake)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_lakehouse_command_refuses_while_an_analysts_dbt_holds_the_metastore(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, [{"name": "files", "landing": str(tmp_path)}])
    lake = tmp_path / "lake"
    lock = lake / "_state" / "locks" / "metastore.lock"
    lock.parent.mkdir(parents=True)
    # What scripts/analyst_dbt.sh holds while dbt runs (flock(1) on the same file).
    analyst = subprocess.Popen(["flock", str(lock), "sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            probe = subprocess.run(["flock", "--nonblock", str(lock), "true"], check=False)
            if probe.returncode != 0:
                break
            time.sleep(0.1)
        started = time.monotonic()
        gold = Lakehouse(lake, config, "gold")
        assert gold.finish(timeout=30) == 3
        assert time.monotonic() - started < 10
        assert "embedded Derby metastore admits one Spark process at a time" in _last_error(gold)
    finally:
        analyst.kill()
        analyst.wait()
    assert not (lake / "metastore_db").exists()  # refused before any JVM opened Derby


def test_failures_end_with_one_line_and_a_non_zero_code(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "landing-file"
    not_a_folder.write_text("I am a file\n")
    files = write_config(tmp_path / "files", [{"name": "files", "landing": str(not_a_folder)}])
    # nothing listens on this port: Kafka must fail within the bounded retries, not hang
    dead = write_config(
        tmp_path / "kafka",
        [{"name": "dead", "kafka": {"bootstrap_servers": f"127.0.0.1:{free_ports(1)[0]}",
                                    "topics": ["cdc.t"]}}],
    )  # fmt: skip
    started = time.monotonic()
    landing = Lakehouse(tmp_path / "lake1", files, "ingest")
    kafka = Lakehouse(tmp_path / "lake2", dead, "ingest")
    unknown = Lakehouse(tmp_path / "lake3", files, "ingest", "--source", "nope")

    assert unknown.finish(timeout=30) == 2
    assert _last_error(unknown).startswith("lakehouse: config error: ")
    assert "no source named 'nope' (known: files)" in _last_error(unknown)

    assert landing.finish(timeout=180) == 1
    assert _last_error(landing) == (
        f"lakehouse ingest: failed: LandingError: source 'files': landing {not_a_folder} "
        "is not a folder"
    )

    assert kafka.finish(timeout=240) == 1
    elapsed = time.monotonic() - started
    assert _last_error(kafka).startswith("lakehouse ingest: failed: ")
    print(f"unreachable Kafka failed after {elapsed:.0f} s: {_last_error(kafka)}")
