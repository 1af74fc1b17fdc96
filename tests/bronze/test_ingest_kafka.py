"""The real ingest over a real Kafka broker: every record once, byte-exact, then only new ones."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pyspark_jobs.bronze.ingest import ingest
from pyspark_jobs.config import load_config
from pyspark_jobs.settings import Settings
from tests.bronze.conftest import bronze_rows, quarantine_rows, write_config
from tests.support.kafka_broker import KafkaBroker

pytestmark = pytest.mark.kafka

DEBEZIUM = (
    b'{"op":"c","before":null,"after":{"id":1,"price":1.50,"name":"Jos\\u00e9"},'
    b'"source":{"table":"orders","lsn":10},"ts_ms":1700000000000}'
)
CASSANDRA = (
    b'{"op":"u","ts_ms":1562202942716,"after":{"id":{"value":7,"deletion_ts":null,"set":true},'
    b'"email":{"value":"a@b.c","deletion_ts":null,"set":true}},'
    b'"source":{"keyspace":"inv","table":"customers","ts_ms":1562202942666382}}'
)
TIGERGRAPH = b'{"vertices":[{"v_type":"Person","v_id":"p1","v":{"name":"Ana","age":31}}]}'
NOT_UTF8 = b"\xff\xfe\x00 not text \xc3\x28"

FIRST = {
    # topic: [(key, value, partition)]
    "cdc.orders": [
        (b'{"id":1}', DEBEZIUM, 0),
        (b'{"id":1}', None, 0),  # tombstone
        (b'{"id":2}', b'{"op":"d","before":{"id":2},"after":null}', 1),
        (b'{"id":3}', NOT_UTF8, 1),
    ],
    "cdc.graph": [
        (b'{"id":7}', CASSANDRA, 0),
        (b"p1", TIGERGRAPH, 1),
        (None, b'  {"spaced" : true}  ', 1),  # kept with its spaces, null key
    ],
}
SECOND = {"cdc.graph": [(b"p2", b'{"vertices":[]}', 0), (b"p1", None, 1)]}


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode()


def _expected(produced: dict[str, list[tuple[int, int, bytes | None, bytes | None]]]) -> list:
    return sorted(
        (
            (topic, partition, offset, _text(key), _text(value))
            for topic, records in produced.items()
            for partition, offset, key, value in records
            if value != NOT_UTF8
        ),
        key=repr,
    )


def _produce(broker: KafkaBroker, batch: dict, produced: dict) -> None:
    for topic, records in batch.items():
        coords = broker.produce(topic, records)
        produced.setdefault(topic, []).extend(
            (p, o, k, v) for (p, o), (k, v, _) in zip(coords, records, strict=True)
        )


def test_kafka_records_land_exactly_once_byte_exact(
    spark: SparkSession, empty_lake: Settings, tmp_path: Path
) -> None:
    with KafkaBroker(tmp_path / "kafka") as broker:
        for topic in FIRST:
            broker.create_topic(topic, partitions=2)
        produced: dict = {}
        _produce(broker, FIRST, produced)
        kafka = {"bootstrap_servers": broker.bootstrap_servers}
        config = load_config(
            write_config(
                tmp_path,
                [
                    {"name": "by_list", "kafka": {**kafka, "topics": ["cdc.orders", "cdc.graph"]}},
                    {"name": "by_pattern", "kafka": {**kafka, "topic_pattern": r"cdc\..*"}},
                ],
            )
        )
        logged: list[str] = []

        reports = ingest(spark, empty_lake, config, max_per_batch=3, log=logged.append)

        expected = _expected(produced)
        for source in ("by_list", "by_pattern"):
            assert bronze_rows(spark, source) == expected
            assert quarantine_rows(spark, source) == [
                ("value is not valid UTF-8", base64.b64encode(NOT_UTF8).decode())
            ]
        assert [(r.read, r.landed, r.quarantined) for r in reports] == [(7, 6, 1)] * 2
        # one line per source and batch, with the Kafka lag; the last batch is caught up
        line = re.compile(
            r"bronze (by_list|by_pattern): batch (\d+): read (\d+), landed (\d+), "
            r"quarantined (\d+), lag (\d+) offsets"
        )
        parsed = [line.fullmatch(text) for text in logged]
        assert all(parsed), logged
        by_list = [m for m in parsed if m and m.group(1) == "by_list"]
        assert len(by_list) == len(reports[0].batches) >= 2  # 7 offsets, about 3 per batch
        assert sum(int(m.group(3)) for m in by_list) == 7
        assert int(by_list[0].group(6)) > 0 and int(by_list[-1].group(6)) == 0

        # nothing new: nothing read, nothing added
        again = ingest(spark, empty_lake, config, log=logged.append)
        assert [r.read for r in again] == [0, 0]
        assert bronze_rows(spark, "by_list") == expected

        # more records: only those
        _produce(broker, SECOND, produced)
        more = ingest(spark, empty_lake, config, log=logged.append)
        assert [(r.read, r.landed) for r in more] == [(2, 2), (2, 2)]
        for source in ("by_list", "by_pattern"):
            assert bronze_rows(spark, source) == _expected(produced)
