"""The net states of a gold run, written once before any table is touched.

A run's writes span several Delta tables (rejects, tombstones, every gold table and its
history), and Delta commits one table at a time. So the fold's result is first committed
to ``lakehouse.gold_pending``: the states of every table, plus one marker row per table
the run covers. Every later write reads these states and is safe to repeat, so a run
killed at any point is finished by the next one from the same states, never re-folded
against half-updated tables, and no table is skipped or applied twice. The next run
replaces the pending states (one overwrite).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.gold.folds.shared import NET_STATE_SCHEMA

PENDING_TABLE = "lakehouse.gold_pending"


@dataclass(frozen=True)
class StagedRun:
    """A staged run: the change-log version it applies and the tables it covers."""

    version: int
    tables: tuple[str, ...]


def ensure_pending_table(spark: SparkSession) -> None:
    """Create the pending table: net states plus the run's columns."""
    spark.sql(
        f"""
        create table if not exists {PENDING_TABLE} (
            silver_version bigint not null comment 'change_log version the run applies',
            is_marker boolean not null comment 'one marker row per table the run covers',
            {NET_STATE_SCHEMA},
            _reject_reason string comment 'why the state may not be merged, or null'
        ) using delta
        comment 'Net states of the last gold run, committed before any table is written'
        """
    )


def stage(spark: SparkSession, states: DataFrame, tables: Sequence[str], version: int) -> StagedRun:
    """Commit ``states`` (net states with ``_reject_reason``) and one marker per table."""
    columns = spark.table(PENDING_TABLE).columns
    markers = spark.createDataFrame([(t,) for t in tables], "table_name string").select(
        *[
            F.col("table_name") if c == "table_name" else F.lit(None).alias(c)
            for c in columns
            if c not in ("silver_version", "is_marker")
        ],
    )
    rows = states.select(
        *[c for c in columns if c not in ("silver_version", "is_marker")]
    ).withColumn("is_marker", F.lit(False))
    staged = rows.unionByName(markers.withColumn("is_marker", F.lit(True))).withColumn(
        "silver_version", F.lit(version).cast("bigint")
    )
    staged.select(*columns).write.format("delta").mode("overwrite").saveAsTable(PENDING_TABLE)
    return StagedRun(version, tuple(tables))


def unfinished_run(spark: SparkSession, applied: dict[str, int]) -> StagedRun | None:
    """The staged run whose tables are not all marked applied, if any.

    ``applied``: table -> last change-log version applied (``lakehouse.gold_progress``).
    One marker row per table: small by construction.
    """
    markers = (
        spark.table(PENDING_TABLE)
        .where(F.col("is_marker"))
        .select("table_name", "silver_version")
        .collect()
    )
    behind = [
        (m["table_name"], int(m["silver_version"]))
        for m in markers
        if int(m["silver_version"]) > applied.get(m["table_name"], -1)
    ]
    if not behind:
        return None
    return StagedRun(behind[0][1], tuple(t for t, _ in behind))


def staged_states(spark: SparkSession, run: StagedRun) -> DataFrame:
    """The net states of ``run`` (markers excluded)."""
    return spark.table(PENDING_TABLE).where(
        ~F.col("is_marker") & (F.col("silver_version") == run.version)
    )
