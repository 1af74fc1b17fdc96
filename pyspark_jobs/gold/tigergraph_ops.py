"""How TigerGraph attribute ops apply to an attribute's current value.

Values are text as silver keeps them (strings unquoted, numbers as written, lists and
maps as compact JSON). What an op means depends on the attribute's declared type, so
each declared column is put in a category: ``int`` / ``real`` (numbers), ``bool``,
``json`` (lists and maps, told apart by the value's first character) and ``text``
(strings, dates, timestamps: compared as text, which orders ISO dates correctly).

A TigerGraph attribute always has a value: a new vertex or edge starts with every
attribute at its default (``type_default``, or the entity's declared ``defaults``), so the
fold hands every op the current value, defaults included: ``Max(0, -5)`` is 0 and
``And(false, true)`` is false, as in TigerGraph. An attribute the config does not declare
has no default; an op on it (null) stores the op's value, except ``Minus``, which
subtracts from zero or removes from an empty list/map. A value that does not parse as the
attribute's type is stored as is, so gold's pre-merge check rejects it instead of the
arithmetic silently turning it into a null.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F

from pyspark_jobs.array_lookups import restricted_map, without

OPS = (
    "Overwrite",
    "Add",
    "Max",
    "Min",
    "And",
    "Or",
    "IgnoreIfExisted",
    "Minus",
    "ReplaceOrAdd",
)

_INT_TYPES = ("int", "bigint", "smallint", "tinyint")
_REAL_TYPES = ("float", "double")


# TigerGraph's type defaults, as value text. A `json` attribute may hold a list or a map
# and the declared type cannot tell which: it starts as the empty list unless the entity
# declares `defaults: {column: {}}`; ops treat an empty list or map by the op's value.
_TYPE_DEFAULTS = {"bool": "false", "int": "0", "real": "0.0", "json": "[]"}
_TEXT_DEFAULTS = {"timestamp": "1970-01-01 00:00:00", "date": "1970-01-01"}


def type_default(declared: str) -> str:
    """TigerGraph's default value of an attribute of this declared type, as value text.

    >>> type_default("bigint"), type_default("timestamp"), type_default("string")
    ('0', '1970-01-01 00:00:00', '')
    """
    return _TEXT_DEFAULTS.get(declared) or _TYPE_DEFAULTS.get(category(declared), "")


def category(declared: str) -> str:
    """The op category of a declared column type."""
    if declared in _INT_TYPES:
        return "int"
    if declared in _REAL_TYPES or declared.startswith("decimal"):
        return "real"
    if declared == "boolean":
        return "bool"
    if declared == "json":
        return "json"
    return "text"


def categories(columns: Mapping[str, str]) -> Column:
    """A literal map column -> category, for looking categories up inside lambdas."""
    if not columns:
        return F.create_map().cast("map<string, string>")
    return F.create_map(*[F.lit(x) for c, t in columns.items() for x in (c, category(t))])


def _number_op(op: Column, old: Column, val: Column, spark_type: str) -> Column:
    o, v = old.try_cast(spark_type), val.try_cast(spark_type)
    result = (
        F.when(op == "Add", F.coalesce(o, F.lit(0).cast(spark_type)) + v)
        .when(op == "Minus", F.coalesce(o, F.lit(0).cast(spark_type)) - v)
        .when(op == "Max", F.greatest(o, v))
        .when(op == "Min", F.least(o, v))
        .otherwise(v)
    )
    return F.when(v.isNull(), val).otherwise(result.cast("string"))


def _bool_op(op: Column, old: Column, val: Column) -> Column:
    o, v = old.try_cast("boolean"), val.try_cast("boolean")
    result = (
        F.when(op == "And", F.coalesce(o, v) & v)
        .when(op == "Or", F.coalesce(o, v) | v)
        .when(op == "Minus", o)
        .otherwise(v)
    )
    return F.when(v.isNull(), val).otherwise(result.cast("string"))


def _text_op(op: Column, old: Column, val: Column) -> Column:
    return (
        F.when(op == "Add", F.concat(F.coalesce(old, F.lit("")), val))
        .when(op == "Max", F.greatest(old, val))
        .when(op == "Min", F.least(old, val))
        .when(op == "Minus", old)
        .otherwise(val)
    )


def _list_items(text: Column) -> Column:
    # Each element as text: Spark's JSON reader keeps a non-string element's JSON text.
    return F.coalesce(F.from_json(text, "array<string>"), F.array().cast("array<string>"))


def _quoted_list(text: Column) -> Column:
    return F.coalesce(text.rlike(r'^\s*\[\s*"'), F.lit(False))


def _list_text(items: Column, quoted: Column) -> Column:
    """Elements back to a JSON list: strings quoted, other elements as their JSON text."""
    return F.when(quoted, F.to_json(items)).otherwise(
        F.concat(F.lit("["), F.array_join(items, ","), F.lit("]"))
    )


def _map_entries(text: Column) -> Column:
    return F.coalesce(
        F.from_json(text, "map<string, string>"), F.create_map().cast("map<string, string>")
    )


def _quoted_map(text: Column) -> Column:
    return F.coalesce(text.rlike(r'^\s*\{\s*"(?:[^"\\]|\\.)*"\s*:\s*"'), F.lit(False))


def _map_text(m: Column, quoted: Column) -> Column:
    """Entries back to a JSON object: string values quoted, others as their JSON text."""
    unquoted = F.concat(
        F.lit("{"),
        F.array_join(
            F.transform(
                F.map_entries(m),
                lambda e: F.concat(
                    F.regexp_extract(F.to_json(F.array(e["key"])), r"^\[(.*)\]$", 1),
                    F.lit(":"),
                    e["value"],
                ),
            ),
            ",",
        ),
        F.lit("}"),
    )
    return F.when(quoted, F.to_json(m)).otherwise(unquoted)


def _json_op(op: Column, old: Column, val: Column) -> Column:
    # An empty default says nothing about the attribute's shape: the op's value does.
    empty = old.isin("[]", "{}")
    is_map = F.coalesce(
        F.when(empty, val.startswith("{")).otherwise(old.startswith("{")), F.lit(False)
    )
    old_items, val_items = _list_items(old), _list_items(val)
    list_quoted = _quoted_list(old) | _quoted_list(val)
    lists = (
        F.when(op == "Add", _list_text(F.concat(old_items, val_items), list_quoted))
        .when(
            op == "Minus",
            _list_text(without(old_items, val_items), list_quoted),
        )
        .otherwise(val)
    )
    old_map, val_map = _map_entries(old), _map_entries(val)
    map_quoted = _quoted_map(old) | _quoted_map(val)
    removed_keys = F.when(val.startswith("{"), F.map_keys(val_map)).otherwise(val_items)
    maps = (
        F.when(
            op.isin("Add", "ReplaceOrAdd"),
            _map_text(
                F.map_zip_with(old_map, val_map, lambda _, a, b: F.coalesce(b, a)), map_quoted
            ),
        )
        .when(
            op == "Minus",
            _map_text(
                restricted_map(old_map, without(F.map_keys(old_map), removed_keys)), map_quoted
            ),
        )
        .otherwise(val)
    )
    return F.when(empty & (op == "Minus"), old).when(is_map, maps).otherwise(lists)


def apply_op(op: Column, old: Column, val: Column, cat: Column, existed: Column) -> Column:
    """The attribute's new value text after ``op`` with ``val`` on ``old``.

    ``cat`` is the attribute's category (see ``category``); ``existed`` whether the
    vertex/edge existed before this change (``IgnoreIfExisted`` keeps its value then).
    """
    empty_json = F.when(val.startswith("{"), F.lit("{}")).otherwise(F.lit("[]"))
    return (
        F.when(op == "Overwrite", val)
        .when(op == "IgnoreIfExisted", F.when(existed, old).otherwise(val))
        .when(old.isNull() & (op != "Minus"), val)
        .when(cat == "int", _number_op(op, old, val, "bigint"))
        .when(cat == "real", _number_op(op, old, val, "double"))
        .when(cat == "bool", _bool_op(op, old, val))
        .when(cat == "json", _json_op(op, F.coalesce(old, empty_json), val))
        .otherwise(_text_op(op, old, val))
    )
