"""The project's local Kafka broker really runs and keeps keys, partitions and tombstones."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from tests.support.kafka_broker import KafkaBroker, free_ports

pytestmark = pytest.mark.kafka


def test_broker_round_trip_with_tombstone(tmp_path: Path) -> None:
    records = [(b"k1", b"v1", 0), (b"k2", b"v2", 1), (b"k1", None, 0)]  # last: tombstone of k1
    with KafkaBroker(tmp_path) as broker:
        broker.create_topic("cdc.orders", partitions=2)
        assert broker.produce("cdc.orders", records) == [(0, 0), (1, 0), (0, 1)]

        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap_servers,
            group_id=None,  # plain assign(): no group coordinator involved
            enable_auto_commit=False,
        )
        try:
            consumer.assign([TopicPartition("cdc.orders", p) for p in (0, 1)])
            consumer.seek_to_beginning()
            got: list[tuple[int, int, bytes | None, bytes | None]] = []
            deadline = time.monotonic() + 30
            while len(got) < len(records) and time.monotonic() < deadline:
                for batch in consumer.poll(timeout_ms=500).values():
                    got.extend((r.partition, r.offset, r.key, r.value) for r in batch)
        finally:
            consumer.close()
        pid = broker.pid

    assert sorted(got) == [(0, 0, b"k1", b"v1"), (0, 1, b"k1", None), (1, 0, b"k2", b"v2")]
    assert pid is not None and not Path(f"/proc/{pid}").exists()  # stopped and reaped


def test_the_ports_a_broker_asks_for_are_distinct() -> None:
    # Picked one by one, two ports came back equal about once in 10,000 draws here, and one
    # CI run lost a test to it: Kafka refuses a listener and its controller on one port.
    for _ in range(20_000):
        port, controller_port = free_ports(2)
        assert port != controller_port
