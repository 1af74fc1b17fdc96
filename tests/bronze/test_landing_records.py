"""Landing lines -> record columns or a quarantine reason (unit level, small DataFrames)."""

from __future__ import annotations

import json

from pyspark.sql import SparkSession

from pyspark_jobs.bronze.landing_records import NOT_JSON, parse_landing_lines

DEEP = 1500  # Jackson refuses documents nested deeper than 1000 levels

GOOD = [
    # (line, expected key, expected value)
    (
        '{"topic":"t","partition":0,"offset":0,"timestamp":1700000000000,'
        '"key":{"id":1},"value":{"op":"c","after":{"id":1,"price":1.50,"name":"Jos\\u00e9"}}}',
        '{"id":1}',
        '{"op":"c","after":{"id":1,"price":1.50,"name":"Jos\\u00e9"}}',
    ),
    # a Kafka tombstone: the record exists, its value is null
    (
        '{"topic":"t","partition":0,"offset":1,"timestamp":null,"key":{"id":1},"value":null}',
        '{"id":1}',
        None,
    ),
    # string-encoded value: the decoded string, exactly (escapes resolved, nothing else)
    (
        '{"topic":"t","partition":1,"offset":7,"key":"k\\u00e9","value":"{\\"op\\": \\"d\\"}"}',
        "k\u00e9",
        '{"op": "d"}',
    ),
    # spacing inside the document and a nested "value" field (Cassandra cells) kept as is
    (
        '{"topic":"t","partition":1,"offset":8,"key":{"id":{"value":2}},'
        '"value": {"after": {"id": {"value": 2, "set": true}}, "ts": 1e3} }',
        '{"id":{"value":2}}',
        '{"after": {"id": {"value": 2, "set": true}}, "ts": 1e3}',
    ),
    # value not last: Spark's compact rendering (documented)
    ('{"value":[1, 2],"topic":"t","partition":2,"offset":0}', None, "[1,2]"),
]

BAD = [
    ("this is not json", NOT_JSON),
    ('{"topic":"t","partition":0,"offset":3,"value":{"op":', NOT_JSON),
    ("\x00\x01\ufffd\ufffdPK\x03\x04", NOT_JSON),
    ('{"topic":"t","partition":0,"offset":4,"value":"' + "x" * (5 * 1024 * 1024), NOT_JSON),
    ('{"topic":"t","partition":0,"offset":5,"value":' + "[" * DEEP + "]" * DEEP + "}", NOT_JSON),
    ('[{"topic":"t"}]', NOT_JSON),
    ("", NOT_JSON),
    ('{"topic":"t","partition":0,"offset":6,"key":null}', "missing field: value"),
    ('{"topic":"t","partition":0,"value":null}', "missing field: offset"),
    ('{"topic":"t","partition":"abc","offset":7,"value":"v"}', "partition is not an integer"),
    ('{"topic":"t","partition":0,"offset":1.5,"value":"v"}', "offset is not an integer"),
    ('{"topic":null,"partition":0,"offset":8,"value":"v"}', "topic is not a string"),
    (
        '{"topic":"t","partition":0,"offset":9,"timestamp":"noon","value":"v"}',
        "timestamp is not epoch milliseconds",
    ),
]


def _parse(spark: SparkSession, lines: list[str]) -> list[tuple]:
    frame = spark.createDataFrame(
        [(line, "f.jsonl") for line in lines], "line string, landing_file string"
    )
    return [
        (r.raw, r.topic, r.partition, r.offset, r.key, r.value, r.problem)
        for r in parse_landing_lines(frame).collect()
    ]


def test_good_lines_keep_key_and_value_exactly(spark: SparkSession) -> None:
    got = _parse(spark, [line for line, _, _ in GOOD])
    expected = []
    for line, key, value in GOOD:
        record = json.loads(line)
        expected.append(
            (line, record["topic"], record["partition"], record["offset"], key, value, None)
        )
    assert sorted(got, key=str) == sorted(expected, key=str)


def test_good_line_timestamp_becomes_kafka_timestamp(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(GOOD[0][0], "f")], "line string, landing_file string")
    row = parse_landing_lines(frame).selectExpr("cast(kafka_timestamp as string) ts").first()
    assert row is not None and row.ts == "2023-11-14 22:13:20"


def test_each_malformed_line_gets_its_reason(spark: SparkSession) -> None:
    got = [(raw, problem) for raw, *_, problem in _parse(spark, [line for line, _ in BAD])]
    assert sorted(got) == sorted(BAD)
