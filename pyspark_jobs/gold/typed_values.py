"""How the change log's text values become the declared column types.

Silver keeps values as text (strings unquoted, everything else as JSON). Gold casts them
with ``try_cast``; a value that is present but does not cast, or casts only by losing part of
it (a rounded decimal, a date given a time, a double out of range), is flagged, never
silently turned into a null or into another value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pyspark.sql import Column
from pyspark.sql import functions as F

from pyspark_jobs.config import Entity
from pyspark_jobs.gold.tables import spark_type

_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
# Text that names an infinite or zero number on purpose (a cast may reach these by loss).
_INFINITE_TEXT = r"(?i)^\s*[+-]?inf(inity)?\s*$"
_ZERO_TEXT = r"^\s*[+-]?(0+\.?0*|\.0+)([eE][+-]?\d+)?\s*$"
# The fractional digits of a number in plain notation, trailing zeros left out.
_FRACTION = r"^\s*[+-]?\d*\.(\d*?)0*\s*$"
# Epoch milliseconds: past these bounds timestamp_millis overflows (an error, not a null);
# silver's key check (macros/castable_to_declared_type.sql) stops at the same bounds.
_EPOCH_DIGITS = r"^-?\d+$"
_MILLIS_CASTABLE = (-9223372036854775, 9223372036854775)
# Years 1 to 9999, what SQL databases hold: epoch microseconds or nanoseconds sent where
# milliseconds are expected land tens of thousands of years out.
_MILLIS_IN_SQL_RANGE = (-62135596800000, 253402300799999)
# Digits of a second beyond the microseconds a Spark timestamp keeps, not all zero.
_SUB_MICROSECOND = r":\d{2}\.\d{6}\d*[1-9]"


def _lossless(text: Column, typed: Column, declared: str) -> Column:
    """True unless the cast of ``text`` to ``declared`` lost part of the value.

    Spark's ``try_cast`` is null for what does not parse or overflows an integer type, but
    some casts succeed by changing the value; after a source changes a column's type these
    are what a silent truncation looks like, so they count as failures:

    - ``decimal(p,s)``: more fractional digits than ``s`` (``12.345`` rounds to ``12.35``);
    - ``double``/``float``: a finite number beyond the range (``1e400`` becomes Infinity) or
      a non-zero one below it (``1e-400`` becomes 0);
    - ``date``: a time of day other than midnight (``2024-01-01T10:00:00``);
    - ``timestamp``: epoch milliseconds outside years 1 to 9999 (microseconds or
      nanoseconds sent where milliseconds are expected), or an ISO time with non-zero
      digits beyond the microsecond (``...:00.123456789``).
    """
    decimal = _DECIMAL.match(declared)
    if decimal:
        precision, scale = int(decimal.group(1)), int(decimal.group(2))
        # Same integer digits, as many fractional ones as fit: catches rounding in any
        # notation (``1.2345E1``) when precision < 38; the regex covers plain notation.
        wide = text.try_cast(f"decimal(38, {38 - (precision - scale)})")
        fraction = F.regexp_extract(text, _FRACTION, 1)
        return (typed == wide) & (F.length(fraction) <= scale)
    if declared in ("double", "float"):
        infinite = F.abs(typed) == F.lit(float("inf")).cast(declared)
        zero = typed == F.lit(0.0).cast(declared)
        return ~(infinite & ~text.rlike(_INFINITE_TEXT)) & ~(zero & ~text.rlike(_ZERO_TEXT))
    if declared == "date":
        instant = text.try_cast("timestamp")
        return instant.isNull() | (instant == typed.cast("timestamp"))
    if declared == "timestamp":
        plain_millis = ~text.rlike(_EPOCH_DIGITS) | text.try_cast("bigint").between(
            *_MILLIS_IN_SQL_RANGE
        )
        return plain_millis & ~text.rlike(_SUB_MICROSECOND)
    return F.lit(True)


def cast_value(text: Column, declared: str, exact: bool = False) -> Column:
    """``text`` as the declared type: null when it does not cast or, with ``exact`` (every
    value column), when it casts only by losing part of the value (see ``_lossless``).

    Keys cast without ``exact``, as silver's key check does (macros/
    castable_to_declared_type.sql, kept in step by tests/silver/test_key_casts.py).

    >>> cast_value(F.lit("42"), "bigint")  # doctest: +SKIP
    """
    if declared in ("string", "json"):
        return text
    if declared == "timestamp":
        # Epoch milliseconds (the common CDC encoding) or an ISO-8601 string.
        millis = text.try_cast("bigint")
        typed = F.when(
            text.rlike(_EPOCH_DIGITS),
            F.when(millis.between(*_MILLIS_CASTABLE), F.timestamp_millis(millis)),
        ).otherwise(text.try_cast("timestamp"))
    else:
        typed = text.try_cast(spark_type(declared))
    return F.when(_lossless(text, typed, declared), typed) if exact else typed


def cast_failed(text: Column, declared: str) -> Column:
    """True when ``text`` holds a value that does not cast to the declared type."""
    return text.isNotNull() & cast_value(text, declared, exact=True).isNull()


def key_columns(record_key: Column, entity: Entity) -> list[Column]:
    """The typed key columns parsed from the canonical ``record_key`` JSON."""
    parsed = F.from_json(record_key, "map<string, string>")
    return [cast_value(parsed[k], entity.columns[k]).alias(k) for k in entity.key]


def canonical_text(
    text: Column, declared: Column, types: Iterable[str], exact: bool = True
) -> Column:
    """``text`` cast to the type the column ``declared`` names, back as text (null when
    it does not cast), so values written differently (``1.50``, ``1.5``) compare equal.

    ``types``: every type ``declared`` may hold; the cast is chosen per row among them,
    so one expression serves the tables of a whole fold family.
    """
    out = F.when(declared.isin("string", "json"), text)
    for typ in sorted(set(types) - {"string", "json"}):
        out = out.when(declared == typ, cast_value(text, typ, exact).cast("string"))
    return out


def declared_types(entities: Iterable[Entity]) -> tuple[str, ...]:
    """The distinct declared column types of ``entities``."""
    return tuple(sorted({t for e in entities for t in e.columns.values()}))
