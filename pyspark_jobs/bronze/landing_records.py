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
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

LINE_SCHEMA = (
    "topic string, `partition` int, `offset` bigint, `timestamp` bigint, key string, value string"
)
_REQUIRED = ("topic", "partition", "offset", "value")
NOT_JSON = "not a JSON object (malformed, truncated or nested too deeply)"

# A zero-width split before each `"value":`; one of the pieces starts the top-level field.
_VALUE_FIELD = r'(?="value"\s*:)'
# The piece's value when it is a document that runs to the line's closing brace.
_DOCUMENT_TO_END = r'^"value"\s*:\s*([\[{].*?)\s*\}\s*$'


def _problem(parsed: Column, keys: Column, line: Column) -> Column:
    """The first reason the line is not a usable record, or null when it is one."""
    reason = F.when(keys.isNull(), F.lit(NOT_JSON))
    for name in _REQUIRED:
        reason = reason.when(~F.array_contains(keys, name), F.lit(f"missing field: {name}"))
    for name, expected in (
        ("topic", "a string"),
        ("partition", "an integer"),
        ("offset", "an integer"),
    ):
        reason = reason.when(parsed[name].isNull(), F.lit(f"{name} is not {expected}"))
    return reason.when(
        F.array_contains(keys, "timestamp")
        & F.get_json_object(line, "$.timestamp").isNotNull()
        & parsed["timestamp"].isNull(),
        F.lit("timestamp is not epoch milliseconds"),
    )


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
        text = candidate(i)
        as_list = F.from_json(F.concat(F.lit("["), text, F.lit("]")), "array<string>")
        return (text != "") & (F.size(as_list) == 1) & (as_list[0] == parsed_value)

    hits = F.filter(F.sequence(F.lit(2), F.greatest(F.size(pieces), F.lit(2))), matches)
    return F.when(F.size(hits) > 0, candidate(hits[0])).otherwise(parsed_value)


def parse_landing_lines(lines: DataFrame) -> DataFrame:
    """Turn ``line``/``landing_file`` rows into record columns plus ``problem``.

    ``problem`` is null for a good record; otherwise it says why the line goes to
    quarantine, and ``raw`` keeps the line as read.
    """
    line = F.col("line")
    return (
        lines.withColumn("_r", F.from_json(line, LINE_SCHEMA))
        .withColumn("_keys", F.expr("json_object_keys(line)"))
        .select(
            F.col("_r.topic").alias("topic"),
            F.col("_r.partition").alias("partition"),
            F.col("_r.offset").alias("offset"),
            F.timestamp_millis(F.col("_r.timestamp")).alias("kafka_timestamp"),
            F.col("_r.key").alias("key"),
            exact_value(line, F.col("_r.value")).alias("value"),
            F.col("landing_file"),
            line.alias("raw"),
            _problem(F.col("_r"), F.col("_keys"), line).alias("problem"),
        )
    )
