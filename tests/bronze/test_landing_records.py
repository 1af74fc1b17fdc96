"""Landing lines -> record columns or a quarantine reason (unit level, small DataFrames)."""

from __future__ import annotations

import base64
import json

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

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
    # the key holds a "value" document first: the field is the later candidate
    (
        '{"topic":"t","partition":2,"offset":1,"key":{"value":{"a":1}},"value":{"b": 2.50}}',
        '{"value":{"a":1}}',
        '{"b": 2.50}',
    ),
    # ... and with a null value, nothing of the key is taken for it
    (
        '{"topic":"t","partition":2,"offset":2,"key":{"value":[1]},"value":null}',
        '{"value":[1]}',
        None,
    ),
    # a "value" document inside the value itself
    (
        '{"topic":"t","partition":2,"offset":3,"value":{"value":{"value": [1.0]}} }',
        None,
        '{"value":{"value": [1.0]}}',
    ),
]

BAD = [
    ("this is not json", NOT_JSON),
    ('{"topic":"t","partition":0,"offset":3,"value":{"op":', NOT_JSON),
    ("\x00\x01\ufffd\ufffdPK\x03\x04", "unescaped control character U+0000 at byte 0 of the line"),
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


RECORD = b'{"topic":"t","partition":0,"offset":1,"key":{"id":1},"value":'
AT = len(RECORD) + len(b'{"n":"a')  # where the value's text starts being hostile

# (line bytes, reason): each names the fault and where it is.
BYTES = [
    (RECORD + b'{"n":"a\xffb"}}', f"invalid UTF-8 at byte {AT} of the line"),
    (RECORD + b'{"n":"a\xc0\xafb"}}', f"invalid UTF-8 at byte {AT} of the line"),  # overlong
    (RECORD + b'{"n":"a\xed\xa0\x80"}}', f"invalid UTF-8 at byte {AT} of the line"),  # surrogate
    # starts like U+FFFD's own bytes (EF BF BD): found all the same
    (RECORD + b'{"n":"a\xef\xbfA"}}', f"invalid UTF-8 at byte {AT} of the line"),
    (RECORD + b'{"n":"a\xef\xbf', f"invalid UTF-8 at byte {AT} of the line"),  # cut off
    (b"\xff" + RECORD[1:] + b"1}", "invalid UTF-8 at byte 0 of the line"),
    (RECORD + b'{"n":"a\x00b"}}', f"unescaped control character U+0000 at byte {AT} of the line"),
    # bytes, not characters: the emoji before it is four bytes
    (
        RECORD + b'{"n":"a\xf0\x9f\x98\x80\x1fb"}}',
        f"unescaped control character U+001F at byte {AT + 4} of the line",
    ),
    (RECORD + b'{"n":"a\tb"}}', NOT_JSON),  # a raw tab inside a string
    (RECORD + b"{'n':'a'}}", NOT_JSON),  # single quotes are not JSON
    (RECORD + b'{"n":NaN}}', NOT_JSON),
    (RECORD + b'{"n":1}} and then some', NOT_JSON),  # text after the object
    (
        b'{"topic":"t","partition":0,"offset":1,"offset":2,"value":1}',
        "duplicate field: offset",
    ),
]


def test_each_hostile_byte_line_names_its_fault(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(bytearray(line),) for line, _ in BYTES], "bytes binary").select(
        F.col("bytes").cast("string").alias("line"), F.lit("f").alias("landing_file")
    )
    got = [(r.raw, r.problem) for r in parse_landing_lines(frame).collect()]
    # raw is the line; base64 of its bytes when they are not UTF-8 text
    expected = []
    for line, reason in BYTES:
        try:
            expected.append((line.decode("utf-8"), reason))
        except UnicodeDecodeError:
            expected.append((base64.b64encode(line).decode(), reason))
    assert sorted(got) == sorted(expected)


def test_a_tab_between_fields_and_text_around_an_escaped_nul_land(spark: SparkSession) -> None:
    line = '{"topic":"t",\t"partition":0,"offset":1,"value":{"n":"a\\u0000b \u05e9\U0001f600"}}'
    [(raw, _, _, _, _, value, problem)] = _parse(spark, [line])
    assert (raw, value, problem) == (line, '{"n":"a\\u0000b \u05e9\U0001f600"}', None)


def _surrogate(escape: str, at: int, where: str = "the line") -> str:
    return (
        f"JSON escape {escape} of a lone surrogate (no Unicode character) at byte {at} of {where}"
    )


LINE = '{"topic":"t","partition":0,"offset":1,"key":{"id":1},"value":'
ESCAPE_AT = len(LINE) + len('{"n":"a')  # ASCII only: characters are bytes

# (line, reason): a JSON escape of half a surrogate pair alone is no Unicode character.
LONE_SURROGATES = [
    (LINE + '{"n":"a\\ud800b"}}', _surrogate("\\ud800", ESCAPE_AT)),
    (LINE + '{"n":"a\\uDBFF"}}', _surrogate("\\uDBFF", ESCAPE_AT)),  # last high, in capitals
    (LINE + '{"n":"a\\udc00"}}', _surrogate("\\udc00", ESCAPE_AT)),  # a low one alone
    (LINE + '{"n":"a\\ud83d\\u0041"}}', _surrogate("\\ud83d", ESCAPE_AT)),  # high, then no low
    (LINE + '{"n":"a\\ude00\\ud83d"}}', _surrogate("\\ude00", ESCAPE_AT)),  # a pair reversed
    (LINE + '{"n":"a\\\\\\ud800"}}', _surrogate("\\ud800", ESCAPE_AT + 2)),  # after a \\
    # a key or value sent as a JSON string: the escape is in the text silver decodes
    (
        '{"topic":"t","partition":0,"offset":1,"value":"{\\"n\\":\\"\\\\ud800\\"}"}',
        _surrogate("\\ud800", len('{"n":"'), "the value"),
    ),
    (
        '{"topic":"t","partition":0,"offset":1,"key":"{\\"id\\":\\"\\\\udfff\\"}","value":null}',
        _surrogate("\\udfff", len('{"id":"'), "the key"),
    ),
]


def test_each_lone_surrogate_escape_is_quarantined_with_where_it_is(spark: SparkSession) -> None:
    got = [
        (raw, problem) for raw, *_, problem in _parse(spark, [line for line, _ in LONE_SURROGATES])
    ]
    assert sorted(got) == sorted(LONE_SURROGATES)


def test_surrogate_pairs_and_escaped_backslashes_land_exactly(spark: SparkSession) -> None:
    values = [
        '{"n":"a\\ud83d\\ude00b"}',  # a pair: an emoji
        '{"n":"a\\\\ud800"}',  # a backslash, then the text ud800
        '{"n":"\\\\\\\\ud800\\uD83D\\uDE00"}',  # two backslashes, text, then a pair
    ]
    lines = [LINE + value + "}" for value in values]
    # a plain-text key is kept as it is: its text is never decoded
    plain_key = '{"topic":"t","partition":0,"offset":1,"key":"\\\\ud800","value":null}'
    got = _parse(spark, [*lines, plain_key])
    assert sorted(((value, problem) for *_, value, problem in got), key=str) == sorted(
        [*((value, None) for value in values), (None, None)], key=str
    )
    assert {key for _, _, _, _, key, _, _ in got} == {'{"id":1}', "\\ud800"}


# JSON documents whose fields may be named "value" and whose text is spaced at random:
# integers and plain strings only, so that Spark's compact rendering is json.dumps's.
_SPACE = st.sampled_from(["", " ", "  ", "\t"])
_NAME = st.sampled_from(["value", "v", "a", "key"])


def _document(depth: int = 2) -> st.SearchStrategy[tuple[str, object]]:
    """(text as written, the parsed document) of a JSON object or array."""
    leaf = st.one_of(
        st.integers(-(10**6), 10**6).map(lambda n: (str(n), n)),
        st.text("ab value{}[]:,", max_size=6).map(lambda t: (json.dumps(t), t)),
        st.none().map(lambda _: ("null", None)),
    )
    child = _document(depth - 1) if depth else leaf
    member = st.one_of(leaf, child)

    def written_object(
        draw_fields: list[tuple[str, tuple[str, object], str]],
    ) -> tuple[str, object]:
        seen: dict[str, object] = {}
        parts = []
        for name, (text, parsed), space in draw_fields:
            if name in seen:
                continue  # a name twice is quarantined, not the subject here
            seen[name] = parsed
            parts.append(f'{space}"{name}"{space}:{space}{text}')
        return "{" + ",".join(parts) + "}", seen

    objects = st.lists(st.tuples(_NAME, member, _SPACE), max_size=3).map(written_object)
    arrays = st.lists(st.tuples(member, _SPACE), max_size=3).map(
        lambda items: (
            "[" + ",".join(f"{space}{text}" for (text, _), space in items) + "]",
            [parsed for (_, parsed), _ in items],
        )
    )
    return st.one_of(objects, arrays)


def _compact(parsed: object) -> str:
    return json.dumps(parsed, separators=(",", ":"), ensure_ascii=False)


@st.composite
def _landing_line(draw: st.DrawFn, offset: int) -> tuple[str, str | None]:
    """A good landing line and the value bronze must keep: the document's own text when
    it is the line's last field, Spark's compact rendering elsewhere."""
    key_text, _ = draw(st.one_of(_document(), st.just(("null", None))))
    value_text, value = draw(st.one_of(_document(), st.just(("null", None))))
    value_last = draw(st.booleans())
    space = draw(_SPACE)
    fields = ['"topic":"t"', '"partition":0', f'"offset":{offset}', f'"key":{key_text}']
    value_field = f'"value"{space}:{space}{value_text}'
    fields = [*fields, value_field] if value_last else [value_field, *fields]
    line = "{" + ",".join(fields) + space + "}"
    if value is None:
        return line, None
    return line, value_text if value_last else _compact(value)


@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
)
@given(st.integers(20, 40).flatmap(lambda n: st.tuples(*(_landing_line(i) for i in range(n)))))
def test_value_documents_keep_their_text_wherever_value_is_named(
    spark: SparkSession, lines: tuple[tuple[str, str | None], ...]
) -> None:
    got = {
        offset: (value, problem)
        for *_, offset, _, value, problem in _parse(spark, [line for line, _ in lines])
    }
    assert got == {i: (value, None) for i, (_, value) in enumerate(lines)}
