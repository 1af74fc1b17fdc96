"""How the change log's text values become the declared column types.

Silver keeps values as text (strings unquoted, everything else as JSON). Gold casts them
with ``try_cast``; a value that is present but does not cast is flagged, never silently
turned into a null.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import Column
from pyspark.sql import functions as F

from pyspark_jobs.config import Entity
from pyspark_jobs.gold.tables import spark_type


def cast_value(text: Column, declared: str) -> Column:
    """``text`` as the declared type (null when it does not cast; see ``cast_failed``).

    >>> cast_value(F.lit("42"), "bigint")  # doctest: +SKIP
    """
    if declared in ("string", "json"):
        return text
    if declared == "timestamp":
        # Epoch milliseconds (the common CDC encoding) or an ISO-8601 string.
        return F.when(
            text.rlike(r"^-?\d+$"), F.timestamp_millis(text.try_cast("bigint"))
        ).otherwise(text.try_cast("timestamp"))
    return text.try_cast(spark_type(declared))


def cast_failed(text: Column, declared: str) -> Column:
    """True when ``text`` holds a value that does not cast to the declared type."""
    return text.isNotNull() & cast_value(text, declared).isNull()


def key_columns(record_key: Column, entity: Entity) -> list[Column]:
    """The typed key columns parsed from the canonical ``record_key`` JSON."""
    parsed = F.from_json(record_key, "map<string, string>")
    return [cast_value(parsed[k], entity.columns[k]).alias(k) for k in entity.key]


def canonical_text(text: Column, declared: Column, types: Iterable[str]) -> Column:
    """``text`` cast to the type the column ``declared`` names, back as text (null when
    it does not cast), so values written differently (``1.50``, ``1.5``) compare equal.

    ``types``: every type ``declared`` may hold; the cast is chosen per row among them,
    so one expression serves the tables of a whole fold family.
    """
    out = F.when(declared.isin("string", "json"), text)
    for typ in sorted(set(types) - {"string", "json"}):
        out = out.when(declared == typ, cast_value(text, typ).cast("string"))
    return out


def declared_types(entities: Iterable[Entity]) -> tuple[str, ...]:
    """The distinct declared column types of ``entities``."""
    return tuple(sorted({t for e in entities for t in e.columns.values()}))
