"""The json_tuple_field macro (staging models read a record's fields with one json_tuple
instead of a get_json_object per field): every field it gives is the text
get_json_object gives for the same path, on generated JSON with the spellings that
differ between parsers (numbers, escapes, nesting, names given twice, text that is not
an object)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, Phase, given, settings
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
    ]
)
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
    """The macro over a json_tuple of the value and one of its `source` block, as the
    Debezium and Cassandra staging models use it, beside get_json_object's reading."""
    twice = macro_sql("names_a_field_twice", "value", file="bronze_records")
    fields = {
        "t_op": "$.op",
        "t_after": "$.after",
        "s_db": "$.source.db",
        "s_lsn": "$.source.lsn",
    }
    pairs = ",\n".join(
        f"{macro_sql('json_tuple_field', column, 'value', path)} as {column}_read,"
        f" get_json_object(value, '{path}') as {column}_reference"
        for column, path in fields.items()
    )
    return f"""
        select i, {pairs}
        from (
            select i, value, case when {twice} then 'value' end as field_twice_within
            from generated
        )
        lateral view outer json_tuple(value, 'op', 'after', 'source') t
            as t_op, t_after, t_source
        lateral view outer json_tuple(t_source, 'db', 'lsn') s as s_db, s_lsn
    """


@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],
)
@given(st.lists(VALUES, min_size=30, max_size=60))
def test_each_field_reads_as_get_json_object_reads_it(
    spark: SparkSession, values: list[str | None]
) -> None:
    spark.createDataFrame(list(enumerate(values)), "i int, value string").createOrReplaceTempView(
        "generated"
    )
    rows = spark.sql(reads_sql()).collect()

    assert len(rows) == len(values)
    for row in rows:
        for column in ("t_op", "t_after", "s_db", "s_lsn"):
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
