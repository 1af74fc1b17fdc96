"""Turn exceptions from Spark, Delta and dbt into one readable line."""

from __future__ import annotations


def describe(exc: BaseException) -> str:
    """The first meaningful line of an exception, without JVM stack traces."""
    text = str(exc).strip() or type(exc).__name__
    first = text.splitlines()[0]
    return f"{type(exc).__name__}: {first}"
