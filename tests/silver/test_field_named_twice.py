"""The field_named_twice macro (a field named twice in a change's key or row image is
rejected): the name it reports, against a plain-Python reference, and that its search
runs only on the objects that repeat a name."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tests.support.dbt_macros import macro_sql
from tests.support.lambda_plans import optimized_plan, repeated_parses


def field_named_twice_sql(json_text: str) -> str:
    """The macro rendered as dbt renders it, over a column name."""
    return macro_sql("field_named_twice", json_text)


def reference(names: list[str]) -> str | None:
    """The name whose second mention comes first, or None."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


NAMES = st.lists(st.sampled_from(["a", "b", "c", "ID", "é", "a b"]), max_size=8)
VALUES = st.sampled_from(["1", '"x"', "null", '{"a": 1, "a": 2}', "[1, {}]", '"a"'])


@st.composite
def json_object(draw: st.DrawFn) -> tuple[str, list[str]]:
    """Object text naming fields in the drawn order (repeats allowed), and the names."""
    names = draw(NAMES)
    fields = [f"{json.dumps(n)}: {draw(VALUES)}" for n in names]
    return "{" + ", ".join(fields) + "}", names


@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],
)
@given(st.lists(json_object(), min_size=20, max_size=40))
def test_the_first_name_mentioned_twice_is_reported(
    spark: SparkSession, objects: list[tuple[str, list[str]]]
) -> None:
    frame = spark.createDataFrame(
        [(i, text) for i, (text, _) in enumerate(objects)], "i int, j string"
    )
    got = {
        r["i"]: r["twice"]
        for r in frame.select("i", F.expr(field_named_twice_sql("j")).alias("twice")).collect()
    }

    assert got == {i: reference(names) for i, (_, names) in enumerate(objects)}


def test_text_that_is_no_object_names_nothing(spark: SparkSession):
    frame = spark.createDataFrame([(t,) for t in (None, "", "[1, 1]", '"a"', "{", "1")], "j string")

    assert [r[0] for r in frame.select(F.expr(field_named_twice_sql("j"))).collect()] == [None] * 6


def test_the_search_runs_only_when_a_name_repeats(spark: SparkSession):
    # The search parses the object again for every name it looks up (the parses
    # repeated_parses finds); the condition before it parses the object twice a row.
    frame = spark.createDataFrame([('{"a": 1}',)], "j string")
    twice = frame.select(F.expr(field_named_twice_sql("j")).alias("twice"))
    plan = optimized_plan(twice)

    assert repeated_parses(twice) != []
    assert plan.index("CASE WHEN NOT (size(array_distinct(") < plan.index("THEN filter(")
