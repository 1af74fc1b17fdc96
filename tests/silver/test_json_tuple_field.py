"""The json_tuple_field macro (staging models read a record's fields with one json_tuple
instead of a get_json_object per field): every field it gives is the text
get_json_object gives for the same path, on generated JSON with the spellings that
differ between parsers (numbers, escapes, nesting, names given twice, text that is not
an object)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from tests.support.dbt_macros import macro_sql

# The scalars as written in JSON text: numbers Spark writes back changed, escapes, a lone
# surrogate, and text Spark's parser refuses inside an otherwise valid object.
SCALARS = st.sampled_from(
    [
        "1",
        "-0",
        "12345678901234567890123",
        "1.50",
        "1e400",
        "-0.0",
        "1.0E-3",
        "true",
        "null",
        '"x"',
        '"a\\u00e9\\n\\"q\\""',
        '"\\ud800"',
        '""',
        "[1, 2 , {}]",
        # Strings holding object text: json_tuple reads into them, get_json_object does not.
        '"{\\"db\\": \\"a\\", \\"lsn\\": 1}"',
        '" \\u007b\\"op\\":\\"c\\"}"',
        "'{\"db\": 2}'",
        '"{\\"op\\": 1, \\"db\\": 1, \\"op\\": 2}"',
    ]
)
AFTER = "get_json_object(value, '$.after')"
# (column json_tuple gave, the text it read, the get_json_object path within that text):
# the value's own fields, its `source` block's (a path below the top) and the fields of
# its `after` text (a part of the value, as Debezium's wrapped events are read).
READS = [
    ("t_op", "value", "$.op"),
    ("t_after", "value", "$.after"),
    ("s_db", "value", "$.source.db"),
    ("s_lsn", "value", "$.source.lsn"),
    ("a_db", AFTER, "$.db"),
    ("a_op", AFTER, "$.op"),
]
NAMES = st.sampled_from(["op", "after", "source", "db", "lsn", "OP"])


@st.composite
def json_object(draw: st.DrawFn, depth: int = 2) -> str:
    """Object text whose names may repeat, with objects nested up to ``depth``."""
    fields = []
    for name in draw(st.lists(NAMES, max_size=5)):
        value = draw(json_object(depth - 1)) if depth and draw(st.booleans()) else draw(SCALARS)
        fields.append(f"{json.dumps(name)}:{draw(st.sampled_from(['', ' ']))}{value}")
    return "{" + ", ".join(fields) + "}"


VALUES = st.one_of(
    json_object(),
    st.sampled_from([None, "[1]", '"op"', "not json", '{"op": "c"', '{"op": "c"} trailing', "{}"]),
)


def reads_sql() -> str:
    """The macro over each of READS, beside get_json_object's reading."""
    twice = macro_sql("names_a_field_twice", "value")
    object_text = macro_sql("string_starts_like_an_object", "value")
    inexact = macro_sql("inexact_json_number", "value")
    pairs = ",\n".join(
        f"{macro_sql('json_tuple_field', column, json, path)} as {column}_read,"
        f" get_json_object({json}, '{path}') as {column}_reference"
        for column, json, path in READS
    )
    return f"""
        select i, {pairs}
        from (
            select
                i,
                value,
                case when {twice} then 'value' end as field_twice_within,
                {object_text} as object_text_in_a_string,
                {inexact} as inexact_number
            from generated
        )
        lateral view outer json_tuple(value, 'op', 'after', 'source') t
            as t_op, t_after, t_source
        lateral view outer json_tuple(t_source, 'db', 'lsn') s as s_db, s_lsn
        lateral view outer json_tuple(t_after, 'db', 'op') a as a_db, a_op
    """


@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],
)
@given(st.lists(VALUES, min_size=30, max_size=60))
# Found by CI on 2026-12-06: a number that overflows a double, below the top, was read
# as Infinity through its parent's text and as "Infinity" by get_json_object.
@example(
    [
        '{"source":{"db":1e400}, "after":"x"}',
        '{"after": {"db": -1e400, "op": 1e400}, "source": {"lsn": 1e400}}',
    ]
)
def test_each_field_reads_as_get_json_object_reads_it(
    spark: SparkSession, values: list[str | None]
) -> None:
    spark.createDataFrame(list(enumerate(values)), "i int, value string").createOrReplaceTempView(
        "generated"
    )
    rows = spark.sql(reads_sql()).collect()

    assert len(rows) == len(values)
    for row in rows:
        for column, _, _ in READS:
            assert row[f"{column}_read"] == row[f"{column}_reference"], (
                values[row["i"]],
                column,
            )


def test_a_name_given_twice_reads_the_first_as_get_json_object_does(spark: SparkSession):
    # json_tuple alone takes the last of the two: the macro reads such a value again.
    value = '{"op": "c", "op": "x", "source": {"db": "a", "db": "b"}}'
    spark.createDataFrame([(0, value)], "i int, value string").createOrReplaceTempView("generated")
    row = spark.sql(reads_sql()).collect()[0]

    assert (row["t_op_read"], row["s_db_read"]) == ("c", "a")
    direct = spark.sql(
        "select t.* from generated lateral view json_tuple(value, 'op') t as op"
    ).collect()
    assert direct[0]["op"] == "x"


def test_a_string_holding_object_text_is_no_object_as_get_json_object_reads_it(
    spark: SparkSession,
):
    # json_tuple alone reads into `source`, and takes the last `op` of the text `after`
    # holds (the check for names given twice sees a string there): the macro reads such a
    # value again.
    source = '"{\\"db\\": \\"a\\"}"'
    after = '"{\\"op\\": \\"x\\", \\"op\\": \\"y\\"}"'
    value = f'{{"op": "c", "source": {source}, "after": {after}}}'
    spark.createDataFrame([(0, value)], "i int, value string").createOrReplaceTempView("generated")
    row = spark.sql(reads_sql()).collect()[0]

    assert (row["s_db_read"], row["a_op_read"], row["t_op_read"]) == (None, "x", "c")
    direct = spark.sql(
        "select s.* from generated lateral view json_tuple(value, 'source') t as source"
        " lateral view json_tuple(source, 'db') s as db"
    ).collect()
    assert direct[0]["db"] == "a"
