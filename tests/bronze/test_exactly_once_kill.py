"""Exactly once under ``kill -9``: the real CLI killed again and again, then run to the end."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pyspark_jobs.config import load_config
from tests.bronze.conftest import record_line, write_config
from tests.bronze.processes import Lakehouse, group_alive
from tests.support.kafka_broker import KafkaBroker

FILES = 16


def _is_batch_line(line: str) -> bool:
    return line.startswith("bronze ") and ": batch " in line


def _jvm_started(proc: Lakehouse) -> bool:
    """Whether the Spark JVM (a `java` child in the group) is running."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name, fields = text[text.index("(") + 1 : text.rindex(")")], text.rsplit(")", 1)[1].split()
        if name == "java" and int(fields[2]) == proc.proc.pid:
            return True
    return False


def _after_jvm_start(proc: Lakehouse) -> None:
    deadline = time.monotonic() + 60
    while not _jvm_started(proc) and time.monotonic() < deadline and proc.proc.poll() is None:
        time.sleep(0.05)
    time.sleep(3.0)  # metastore and tables being set up, stream starting


def _after_batches(count: int, extra: float) -> Callable[[Lakehouse], None]:
    def wait(proc: Lakehouse) -> None:
        seen = 0

        def enough(line: str) -> bool:
            return _is_batch_line(line)

        deadline = time.monotonic() + 120
        while seen < count and time.monotonic() < deadline and proc.proc.poll() is None:
            seen = sum(1 for line in list(proc.lines) if enough(line))
            time.sleep(0.05)
        time.sleep(extra)

    return wait


# Where each kill lands: during Python start-up, right after the JVM comes up (tables,
# checkpoint), right after a batch's line (between batches / early in the next one), and
# at varied points inside later batches.
KILLS: list[tuple[str, Callable[[Lakehouse], None]]] = [
    ("python start-up", lambda proc: time.sleep(1.0)),
    ("after JVM start", _after_jvm_start),
    ("right after batch 1", _after_batches(1, 0.0)),
    ("inside a batch", _after_batches(1, 0.7)),
    ("after 2 batches, later in the next", _after_batches(2, 1.5)),
    ("after 3 batches", _after_batches(3, 0.3)),
]


# The Kafka source shares the checkpoint and idempotent write the file test kills at
# every point; its own risk is the offsets, so it is killed where offsets are in flight.
KAFKA_KILLS = [KILLS[1], KILLS[3], KILLS[4]]


def kill_repeatedly_then_finish(
    lake: Path,
    config: Path,
    max_per_batch: str,
    points: list[tuple[str, Callable[[Lakehouse], None]]] = KILLS,
) -> list[str]:
    """Start ``lakehouse ingest`` and SIGKILL its process group at each of the kill
    ``points``, then run it to completion (exit 0)."""
    kills: list[str] = []
    started = time.monotonic()
    for where, wait in points:
        proc = Lakehouse(lake, config, "ingest", "--max-per-batch", max_per_batch)
        wait(proc)
        if proc.proc.poll() is not None:  # finished before the kill: nothing left to kill
            assert proc.finish(10) == 0, proc.errors[-5:]
            break
        proc.kill_group()
        kills.append(f"{where} ({sum(map(_is_batch_line, proc.lines))} batch lines)")
        assert not group_alive(proc.proc.pid)

    final = Lakehouse(lake, config, "ingest", "--max-per-batch", max_per_batch)
    assert final.finish(timeout=300) == 0, final.errors[-10:]
    assert len(kills) >= len(points) - 1, kills
    print(f"kills: {kills}; total {time.monotonic() - started:.0f} s")
    return kills


def test_kill_9_at_any_point_loses_and_duplicates_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    expected = []
    for n in range(FILES):
        value = {"op": "c", "after": {"id": n}}
        lines = [record_line("db.t", n % 2, n, value, {"id": n})]
        expected.append(("db.t", n % 2, n, f'{{"op":"c","after":{{"id":{n}}}}}'))
        if n % 10 == 0:  # a tombstone now and then
            lines.append(record_line("db.t", n % 2, 1000 + n, None, {"id": n}))
            expected.append(("db.t", n % 2, 1000 + n, None))
        if n == 7:
            lines.append('{"topic":"db.t","partition":0,"offset":"x","value":null}')
        (landing / f"{n:03d}.jsonl").write_text("".join(f"{line}\n" for line in lines))
    config = write_config(tmp_path, [{"name": "files", "landing": str(landing)}])
    load_config(config)  # the file is valid
    lake = tmp_path / "lake"

    kill_repeatedly_then_finish(lake, config, "1")

    raw = spark.read.format("delta").load(str(lake / "warehouse" / "bronze.db" / "cdc_raw"))
    got = sorted(
        (tuple(r) for r in raw.select("topic", "partition", "offset", "value").collect()),
        key=repr,
    )
    assert got == sorted(expected, key=repr)  # every record, each exactly once
    quarantine = spark.read.format("delta").load(
        str(lake / "warehouse" / "bronze.db" / "cdc_quarantine")
    )
    assert [tuple(r) for r in quarantine.select("reason").collect()] == [
        ("offset is not an integer",)
    ]


@pytest.mark.kafka
def test_kill_9_kafka_source_loses_and_duplicates_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    with KafkaBroker(tmp_path / "kafka") as broker:
        broker.create_topic("cdc.t", partitions=2)
        records = [
            (f'{{"id":{n}}}'.encode(), None if n % 9 == 0 else f'{{"n":{n}}}'.encode(), n % 2)
            for n in range(28)
        ]
        coords = broker.produce("cdc.t", records)
        expected = sorted(
            (("cdc.t", p, o, None if v is None else v.decode()) for (p, o), (_, v, _) in
             zip(coords, records, strict=True)),
            key=repr,
        )  # fmt: skip
        kafka = {"bootstrap_servers": broker.bootstrap_servers, "topics": ["cdc.t"]}
        config = write_config(tmp_path, [{"name": "events", "kafka": kafka}])
        lake = tmp_path / "lake"

        kill_repeatedly_then_finish(lake, config, "2", KAFKA_KILLS)

    raw = spark.read.format("delta").load(str(lake / "warehouse" / "bronze.db" / "cdc_raw"))
    got = sorted(
        (tuple(r) for r in raw.select("topic", "partition", "offset", "value").collect()),
        key=repr,
    )
    assert got == expected  # every record, each exactly once
