"""Is a peer's table the same as ours? Compared in Spark, row for row."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame


def differences(ours: DataFrame, theirs: DataFrame, columns: Sequence[str]) -> dict[str, int]:
    """Rows (on ``columns``) only in ours (``missing``) and only in theirs (``extra``),
    duplicates counted; both 0 when the tables are equal."""
    a, b = ours.select(*columns), theirs.select(*columns)
    return {"missing": a.exceptAll(b).count(), "extra": b.exceptAll(a).count()}
