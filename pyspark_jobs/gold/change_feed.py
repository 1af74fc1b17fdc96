"""Which change-log rows gold has not applied yet, tracked by silver table version.

Gold follows ``silver.change_log`` through Delta's change data feed: each gold table
remembers the last change-log version it applied (``lakehouse.gold_progress``), so a run
reads exactly the commits after it, whatever the wall clock says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.delta_log import holds_files
from pyspark_jobs.gold.tables import PROGRESS_TABLE
from pyspark_jobs.version_memo import memoized, own_commit

CHANGE_LOG_TABLE = "silver.change_log"


@dataclass(frozen=True)
class Progress:
    """A gold table's last applied change-log version, its row count then, and the
    signature of its layout (``GoldTable.signature``) when it was last checked."""

    version: int
    row_count: int | None = None
    signature: str | None = None


def applied_progress(spark: SparkSession) -> dict[str, Progress]:
    """Per gold table, its latest progress row (one row per table: small). Kept in this
    process while the table has no other commit than ``record_progress``'s
    (``version_memo``): a warm cycle does not read it again."""
    return dict(memoized(spark, PROGRESS_TABLE, _LATEST, lambda: _read_progress(spark)))


# The name of applied_progress's value in version_memo.
_LATEST = "latest progress"


def _read_progress(spark: SparkSession) -> dict[str, Progress]:
    if not holds_files(spark, PROGRESS_TABLE):  # a new lake's: no query for no rows
        return {}
    latest = (
        spark.table(PROGRESS_TABLE)
        .groupBy("table_name")
        .agg(
            F.max_by(
                F.struct("silver_version", "row_count", "signature"),
                F.struct("silver_version", "applied_at"),
            ).alias("p")
        )
        .collect()
    )
    return {
        r["table_name"]: Progress(
            int(r["p"]["silver_version"]), r["p"]["row_count"], r["p"]["signature"]
        )
        for r in latest
    }


def _with_recorded(
    latest: Mapping[str, Progress], recorded: Mapping[str, Progress]
) -> dict[str, Progress]:
    """``latest`` after ``recorded`` was appended: a table's new row is its latest unless
    it has a row of a higher version (the order ``_read_progress`` takes)."""
    merged = dict(latest)
    for table, progress in recorded.items():
        if table not in merged or progress.version >= merged[table].version:
            merged[table] = progress
    return merged


def new_changes(
    spark: SparkSession, applied: Mapping[str, int], tables: list[str], up_to_version: int
) -> DataFrame:
    """Change-log rows of ``tables`` committed after each table's applied version, up to
    ``up_to_version`` (``applied``: table -> version; -1 for a table never applied).

    The change data feed is read once, from the least advanced table that has applied
    something. A table that never applied anything takes every row it has in the change
    log as of ``up_to_version`` (the log is append-only, so that is the same rows): a
    table declared long after the log began does not need its whole history, which
    ``lakehouse maintain`` may have vacuumed and Delta refuses to read beyond the table's
    deleted-file retention.
    """
    after = {t: applied.get(t, -1) for t in tables}
    fresh = [t for t, v in after.items() if v < 0]
    following = {t: v for t, v in after.items() if v >= 0}
    parts = []
    if fresh:
        parts.append(change_log_as_of(spark, up_to_version).where(F.col("table_name").isin(fresh)))
    start = min(following.values(), default=up_to_version)
    if start < up_to_version:
        feed = change_log_inserts(spark, start, up_to_version)
        bounds = spark.createDataFrame(
            list(following.items()), "table_name string, _applied bigint"
        )
        parts.append(
            feed.join(F.broadcast(bounds), "table_name")
            .where(F.col("_commit_version") > F.col("_applied"))
            .drop("_change_type", "_commit_timestamp", "_commit_version", "_applied")
        )
    if not parts:
        return spark.table(CHANGE_LOG_TABLE).limit(0)
    return parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])


def change_log_inserts(spark: SparkSession, after_version: int, up_to_version: int) -> DataFrame:
    """Rows the change log gained in versions ``after_version + 1 .. up_to_version``, from
    its change data feed (the log is append-only: inserts are all there is), with the
    feed's ``_change_type`` / ``_commit_version`` / ``_commit_timestamp`` columns."""
    return (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", after_version + 1)
        .option("endingVersion", up_to_version)
        .table(CHANGE_LOG_TABLE)
        .where(F.col("_change_type") == "insert")
    )


def change_log_as_of(spark: SparkSession, version: int) -> DataFrame:
    """The whole change log as of ``version``: the full history the re-folds read."""
    return spark.read.format("delta").option("versionAsOf", version).table(CHANGE_LOG_TABLE)


def record_progress(spark: SparkSession, progress: Mapping[str, Progress]) -> None:
    """Remember each table's progress (one commit for all tables of a run)."""
    if not progress:
        return
    # Its row applied_at (now) is the newest of the table's rows at the same version.
    with own_commit(spark, PROGRESS_TABLE, _LATEST, lambda held: _with_recorded(held, progress)):
        _append_progress(spark, progress)


def _append_progress(spark: SparkSession, progress: Mapping[str, Progress]) -> None:
    spark.createDataFrame(
        [(t, p.version, p.row_count, p.signature) for t, p in progress.items()],
        "table_name string, silver_version bigint, row_count bigint, signature string",
    ).select(
        "table_name",
        "silver_version",
        F.current_timestamp().alias("applied_at"),
        "row_count",
        "signature",
    ).write.format("delta").mode("append").saveAsTable(PROGRESS_TABLE)
