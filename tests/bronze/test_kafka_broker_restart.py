"""Broker faults: the Kafka broker crashes and comes back while `lakehouse ingest --every`
reads it, and again between two ingests; every record lands in bronze exactly once."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.bronze.conftest import write_config
from tests.bronze.processes import Lakehouse
from tests.support.kafka_broker import KafkaBroker

pytestmark = pytest.mark.kafka
TOPIC = "cdc.t"
BATCH_LINE = re.compile(r"bronze events: batch \d+: read \d+, landed (\d+),")


def _landed(proc: Lakehouse) -> int:
    return sum(int(m.group(1)) for line in list(proc.lines) if (m := BATCH_LINE.match(line)))


def _wait_landed(proc: Lakehouse, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _landed(proc) < count:
        assert proc.proc.poll() is None, proc.lines[-10:] + proc.errors[-20:]
        assert time.monotonic() < deadline, proc.lines[-10:] + proc.errors[-10:]
        time.sleep(0.2)


def _produce(broker: KafkaBroker, first: int, count: int) -> list[tuple]:
    records = [
        (f'{{"id":{n}}}'.encode(), f'{{"n":{n}}}'.encode(), n % 2)
        for n in range(first, first + count)
    ]
    coords = broker.produce(TOPIC, records)
    return [(TOPIC, p, o, v.decode()) for (p, o), (_, v, _) in zip(coords, records, strict=True)]


def test_broker_crash_and_restart_loses_and_duplicates_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    with KafkaBroker(tmp_path / "kafka") as broker:
        broker.create_topic(TOPIC, partitions=2)
        expected = _produce(broker, 0, 20)
        kafka = {"bootstrap_servers": broker.bootstrap_servers, "topics": [TOPIC]}
        config = write_config(tmp_path, [{"name": "events", "kafka": kafka}])

        running = Lakehouse(lake, config, "ingest", "--every", "2")
        try:
            _wait_landed(running, 20, timeout=240)
            # A crash (SIGKILL) and a restart on the same ports while the query waits for
            # its next trigger: it reconnects and goes on.
            broker.restart(down_seconds=3, crash=True)
            expected += _produce(broker, 20, 20)
            _wait_landed(running, 40, timeout=180)
        finally:
            running.proc.send_signal(signal.SIGTERM)
            code = running.finish(timeout=120)
        assert code == 0, running.errors[-10:]

        # Down while no ingest runs: the next ingest resumes from its checkpoint.
        broker.restart(down_seconds=1, crash=True)
        expected += _produce(broker, 40, 10)
        again = Lakehouse(lake, config, "ingest")
        assert again.finish(timeout=300) == 0, again.errors[-10:]
        assert _landed(again) == 10, again.lines

    raw = spark.read.format("delta").load(str(lake / "warehouse" / "bronze.db" / "cdc_raw"))
    got = sorted(
        (tuple(r) for r in raw.select("topic", "partition", "offset", "value").collect()),
        key=repr,
    )
    assert got == sorted(expected, key=repr)  # every record, each exactly once
