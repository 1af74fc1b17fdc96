"""Kafka key/value bytes -> record columns or a quarantine reason (unit level, no broker)."""

from __future__ import annotations

import base64
import datetime

from pyspark.sql import SparkSession

from pyspark_jobs.bronze.readers import kafka_records

WHEN = datetime.datetime(2023, 11, 14, 22, 13, 20)
SCHEMA = (
    "key binary, value binary, topic string, `partition` int, `offset` bigint, timestamp timestamp"
)


def _records(spark: SparkSession, pairs: list[tuple[bytes | None, bytes | None]]) -> list[tuple]:
    frame = spark.createDataFrame(
        [(k, v, "t", 0, n, WHEN) for n, (k, v) in enumerate(pairs)], SCHEMA
    )
    return [
        (r.key, r.value, r.raw, r.problem) for r in kafka_records(frame).orderBy("offset").collect()
    ]


def test_text_lands_and_bytes_that_are_no_text_are_quarantined(spark: SparkSession) -> None:
    got = _records(
        spark,
        [
            (b'{"id":1}', '{"n":"caf\u00e9 \\ud83d\\ude00"}'.encode()),
            (b'{"id":2}', None),  # a tombstone
            (b'{"id":3}', b'{"n":"caf\xe9"}'),
            (b"\xff", b"{}"),
        ],
    )
    assert got == [
        ('{"id":1}', '{"n":"caf\u00e9 \\ud83d\\ude00"}', None, None),
        ('{"id":2}', None, None, None),
        (
            '{"id":3}',
            None,
            base64.b64encode(b'{"n":"caf\xe9"}').decode(),
            "value is not valid UTF-8",
        ),
        (None, "{}", base64.b64encode(b"\xff").decode(), "key is not valid UTF-8"),
    ]


def test_a_lone_surrogate_escape_is_quarantined_with_its_text(spark: SparkSession) -> None:
    value = '{"n":"\u00e9\\ud800"}'  # the e-acute is two bytes
    got = _records(
        spark,
        [
            (b'{"id":1}', value.encode()),
            (b'{"id":"\\udc00"}', b"{}"),
            (b"\\ud800", b"{}"),  # a plain-text key is never decoded: it lands as it is
        ],
    )
    reason = "JSON escape {} of a lone surrogate (no Unicode character) at byte {} of {}"
    assert got == [
        ('{"id":1}', value, value, reason.format("\\ud800", 8, "the value")),
        ('{"id":"\\udc00"}', "{}", '{"id":"\\udc00"}', reason.format("\\udc00", 7, "the key")),
        ("\\ud800", "{}", None, None),
    ]
