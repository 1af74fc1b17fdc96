"""How a landing-file line becomes a Kafka record, or a quarantine reason.

A landing line holds one Kafka record as JSON:
``{"topic", "partition", "offset", "timestamp", "key", "value"}``. ``key`` and ``value``
are either a JSON string (the record's bytes as text: bronze keeps the decoded string) or
an embedded JSON document; ``"value": null`` is a Kafka tombstone.

An embedded ``value`` document is kept as the exact text of the line (spacing, number
spelling and escapes untouched) when ``value`` is the line's last field, which is how
every producer of landing files writes it. Spark's ``from_json`` would re-render it
(``1.50`` -> ``1.5``, ``"\\u00e9"`` -> ``"é"``), so the text is cut from the line and checked
against the parsed value; elsewhere in the line (and for ``key``) the compact rendering of
Spark's JSON parser is kept.

Before any of that, a line must be strict JSON text, or it is quarantined with a reason
naming the fault and where it is: bytes that are not UTF-8 (Spark would read them as
U+FFFD and the change would reach gold altered), a raw control character (Spark's parsers
disagree on those: ``from_json`` refuses them, ``get_json_object`` reads them), anything
Jackson refuses in strict mode, text after the object, a top-level field given twice, a
JSON escape of half a UTF-16 surrogate pair standing alone (``"\\ud800"``: valid JSON
text, no Unicode character; Spark's JSON functions read it as ``?`` or as null), in the
line or in a key or value sent as a JSON string (``lone_surrogates``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pyspark_jobs.bronze.lone_surrogates import (
    lone_surrogate_in_key,
    lone_surrogate_reason,
    one_character_per_byte,
)

# from_json puts a line it cannot parse in this field; a name no producer writes.
_UNPARSED = "__lakehouse_unparsed_line"
LINE_SCHEMA = (
    "topic string, `partition` int, `offset` bigint, `timestamp` bigint, key string, "
    f"value string, {_UNPARSED} string"
)
# Strict JSON: Spark's parser would otherwise take 'single quotes' and NaN, which are not
# JSON and which silver's parser reads differently.
_JSON_OPTIONS = {
    "columnNameOfCorruptRecord": _UNPARSED,
    "allowSingleQuotes": "false",
    "allowNonNumericNumbers": "false",
}
_REQUIRED = ("topic", "partition", "offset", "value")
NOT_JSON = "not a JSON object (malformed, truncated or nested too deeply)"

# Control characters JSON text never holds raw: inside a string they must be escaped
# (\u0000), outside one only space, tab, CR and LF may appear (and a line has no CR or LF).
# A tab inside a string is malformed too, but only the parser can tell where strings are.
_CONTROL = r"[\x00-\x08\x0b\x0c\x0e-\x1f]"

# A zero-width split before each `"value":`; one of the pieces starts the top-level field.
_VALUE_FIELD = r'(?="value"\s*:)'
# The piece's value when it is a document that runs to the line's closing brace.
_DOCUMENT_TO_END = r'^"value"\s*:\s*([\[{].*?)\s*\}\s*$'
# Where a candidate starts, and the first candidate of the whole line.
_DOCUMENT_START = r'"value"\s*:\s*[\[{]'
_FIRST_DOCUMENT_TO_END = _DOCUMENT_TO_END.removeprefix("^")


def one_line_base64(data: Column) -> Column:
    """``data`` (binary) as base64 on one line (Spark's ``base64`` may break it into
    76-character MIME lines)."""
    return F.regexp_replace(F.base64(data), r"[\r\n]", "")


def first_invalid_utf8_byte(text: Column) -> Column:
    """The 0-based offset of the first byte of ``text`` that is not valid UTF-8 (null when
    every byte is).

    ``make_valid_utf8`` replaces each invalid sequence with U+FFFD (EF BF BD), so the
    bytes agree up to the first invalid sequence: a binary search finds the longest common
    prefix ``d`` in log2(length) steps. An invalid sequence that itself starts like
    EF BF agrees for up to two more bytes, so the offset is the longest of the prefixes of
    ``d``, ``d - 1`` and ``d - 2`` bytes that is valid UTF-8 on its own.

    >>> # b'{"a":"x\\xffy"}'  ->  7
    """
    raw = text.cast("binary")
    fixed = F.make_valid_utf8(text).cast("binary")

    def prefix(data: Column, length: Column) -> Column:
        return data.substr(F.lit(1), length)

    def halve(bounds: Column, _: Column) -> Column:
        # Invariant: the first `lo` bytes agree, the first `hi` bytes do not.
        lo, hi = bounds["lo"], bounds["hi"]
        mid = F.floor((lo + hi) / 2).cast("int")
        agree = prefix(raw, mid) == prefix(fixed, mid)
        return F.when(hi - lo <= 1, bounds).otherwise(
            F.struct(
                F.when(agree, mid).otherwise(lo).alias("lo"),
                F.when(agree, hi).otherwise(mid).alias("hi"),
            )
        )

    length = F.octet_length(text)
    steps = F.sequence(F.lit(0), F.ceil(F.log2(length + 2)).cast("int"))
    start = F.struct(F.lit(0).alias("lo"), (length + 1).alias("hi"))
    agreed = F.aggregate(steps, start, halve)["lo"]

    def valid_prefix(n: Column) -> Column:
        return (n >= 0) & F.is_valid_utf8(prefix(raw, n).cast("string"))

    return F.when(
        ~F.is_valid_utf8(text),
        F.when(valid_prefix(agreed), agreed)
        .when(valid_prefix(agreed - 1), agreed - 1)
        .otherwise(agreed - 2),
    )


def _control_character(line: Column) -> tuple[Column, Column]:
    """(1-based byte position, code) of the line's first raw control character; position 0
    when it has none. The line is read one character per byte (ISO-8859-1), so the
    position counts bytes whatever the text before it."""
    by_byte = one_character_per_byte(line)
    position = F.regexp_instr(by_byte, F.lit(_CONTROL))
    return position, F.ascii(F.substring(by_byte, position, 1))


def _problem(parsed: Column, keys: Column, line: Column) -> Column:
    """The first reason the line is not a usable record, or null when it is one."""
    invalid_byte = first_invalid_utf8_byte(line)
    control_at, control = _control_character(line)
    unparsed = (
        parsed[_UNPARSED].isNotNull()
        & F.coalesce(
            parsed["topic"], parsed["partition"].cast("string"), parsed["offset"].cast("string")
        ).isNull()
    )
    # Only a line with a repeated field pays for the (interpreted) lambda naming it.
    repeated = F.size(F.array_distinct(keys)) != F.size(keys)
    duplicates = F.filter(keys, lambda k, i: F.array_position(keys, k) != i + 1)
    surrogate_in_line = lone_surrogate_reason(line, "the line")
    # A key or value sent as a JSON string holds JSON text that silver decodes in turn.
    surrogate_in_record = F.coalesce(
        lone_surrogate_reason(parsed["value"], "the value"), lone_surrogate_in_key(parsed["key"])
    )
    reason = (
        F.when(
            ~F.is_valid_utf8(line),
            F.format_string("invalid UTF-8 at byte %d of the line", invalid_byte),
        )
        .when(
            control_at > 0,
            F.format_string(
                "unescaped control character U+%04X at byte %d of the line", control, control_at - 1
            ),
        )
        # Jackson stops after the first JSON value: text after it would go unnoticed.
        .when(keys.isNull() | unparsed | ~line.rlike(r"\}\s*$"), F.lit(NOT_JSON))
        .when(repeated, F.concat(F.lit("duplicate field: "), duplicates[0]))
        .when(surrogate_in_line.isNotNull(), surrogate_in_line)
    )
    for name in _REQUIRED:
        reason = reason.when(~F.array_contains(keys, name), F.lit(f"missing field: {name}"))
    for name, expected in (
        ("topic", "a string"),
        ("partition", "an integer"),
        ("offset", "an integer"),
    ):
        reason = reason.when(parsed[name].isNull(), F.lit(f"{name} is not {expected}"))
    # A null timestamp is allowed; anything else that did not parse as a number is not. The
    # line is read again only when the parser gave no timestamp.
    return reason.when(
        parsed["timestamp"].isNull()
        & F.array_contains(keys, "timestamp")
        & F.get_json_object(line, "$.timestamp").isNotNull(),
        F.lit("timestamp is not epoch milliseconds"),
    ).when(surrogate_in_record.isNotNull(), surrogate_in_record)


def _single_value_equal(text: Column, parsed_value: Column) -> Column:
    """Whether ``text`` is one JSON value that parses to ``parsed_value``."""
    as_list = F.from_json(F.concat(F.lit("["), text, F.lit("]")), "array<string>", _JSON_OPTIONS)
    return (text != "") & (F.size(as_list) == 1) & (as_list[0] == parsed_value)


def exact_value(line: Column, parsed_value: Column) -> Column:
    """The line's own text of an embedded ``value`` document, else ``parsed_value``.

    Each ``"value":`` in the line starts a candidate running to the closing brace; the one
    that is a single JSON value equal (once parsed) to the top-level value is the field's
    exact text. Candidates inside the key or inside the value itself are not single JSON
    values, so they never match.

    >>> # '{"topic":"t",...,"value": {"a": 1.50}}'  ->  '{"a": 1.50}'  (from_json: '{"a":1.5}')
    """
    pieces = F.split(line, _VALUE_FIELD)

    def candidate(i: Column) -> Column:
        tail = F.array_join(F.slice(pieces, i, F.size(pieces)), "")
        return F.regexp_extract(tail, _DOCUMENT_TO_END, 1)

    def matches(i: Column) -> Column:
        return _single_value_equal(candidate(i), parsed_value)

    hits = F.filter(F.sequence(F.lit(2), F.greatest(F.size(pieces), F.lit(2))), matches)
    every_candidate = F.when(F.size(hits) > 0, candidate(hits[0])).otherwise(parsed_value)
    # Nearly every line has one candidate, the field itself. A higher-order function over
    # the split line costs about 30 times the line's parse (interpreted lambdas, a string
    # joined per candidate), so the first candidate is tried alone and the others only
    # when it is not the field and there are others. `first` sits in the CASE's first
    # condition, which is always evaluated, so generated code computes it once.
    first = F.regexp_extract(line, _FIRST_DOCUMENT_TO_END, 1)
    return (
        F.when(_single_value_equal(first, parsed_value), first)
        .when(
            parsed_value.isNull() | (F.regexp_count(line, F.lit(_DOCUMENT_START)) <= 1),
            parsed_value,
        )
        .otherwise(every_candidate)
    )


def parse_landing_lines(lines: DataFrame) -> DataFrame:
    """Turn ``line``/``landing_file`` rows into record columns plus ``problem``.

    ``problem`` is null for a good record; otherwise it says why the line goes to
    quarantine, and ``raw`` keeps the line as read (base64 of its bytes when they are not
    valid UTF-8).
    """
    line = F.col("line")
    return (
        lines.withColumn("_r", F.from_json(line, LINE_SCHEMA, _JSON_OPTIONS))
        .withColumn("_keys", F.expr("json_object_keys(line)"))
        .select(
            F.col("_r.topic").alias("topic"),
            F.col("_r.partition").alias("partition"),
            F.col("_r.offset").alias("offset"),
            F.timestamp_millis(F.col("_r.timestamp")).alias("kafka_timestamp"),
            F.col("_r.key").alias("key"),
            exact_value(line, F.col("_r.value")).alias("value"),
            F.col("landing_file"),
            # Bytes that are not UTF-8 are no text: kept exactly, as base64.
            F.when(F.is_valid_utf8(line), line)
            .otherwise(one_line_base64(line.cast("binary")))
            .alias("raw"),
            _problem(F.col("_r"), F.col("_keys"), line).alias("problem"),
        )
    )
