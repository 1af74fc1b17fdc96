"""Gold apply job: new change-log rows -> fold per key -> one MERGE per gold table."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.config import Entity, LakehouseConfig, Source
from pyspark_jobs.gold.cassandra_cells import fold_cells
from pyspark_jobs.gold.change_feed import (
    CHANGE_LOG_TABLE,
    applied_versions,
    changes_between,
    latest_version,
    record_progress,
)
from pyspark_jobs.gold.merge import (
    current_images,
    expire_tombstones,
    merge_into_gold,
    merge_tombstones,
    typed_rows,
)
from pyspark_jobs.gold.row_fold import fold_rows
from pyspark_jobs.gold.tables import (
    TOMBSTONES_TABLE,
    ensure_gold_table,
    ensure_state_tables,
    gold_table_name,
)


@dataclass
class TableApply:
    """What one gold table received in this run."""

    table: str
    source: str
    changes: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    cast_errors: int = 0
    rows: int = 0


def fold_changes(
    source: Source, entity: Entity, changes: DataFrame, current: DataFrame, tombstones: DataFrame
) -> DataFrame:
    """The net state per touched key, by the fold the source's format needs."""
    if source.format == "cassandra":
        return fold_cells(changes, current, tombstones, list(entity.value_columns))
    return fold_rows(changes, current, tombstones)


def apply_table(
    spark: SparkSession, source: Source, entity: Entity, changes: DataFrame, report: TableApply
) -> None:
    """Fold and MERGE one table's new changes."""
    tombstones = spark.table(TOMBSTONES_TABLE).where(F.col("table_name") == entity.table)
    net = fold_changes(source, entity, changes, current_images(spark, entity), tombstones)
    rows = typed_rows(net, entity).persist()
    try:
        report.cast_errors = rows.where(F.size("_cast_errors") > 0).count()
        merge_tombstones(spark, rows, entity)
        metrics = merge_into_gold(spark, rows, entity)
    finally:
        rows.unpersist()
    report.inserted, report.updated, report.deleted = (
        metrics.inserted,
        metrics.updated,
        metrics.deleted,
    )


def apply_gold(
    spark: SparkSession, config: LakehouseConfig, log: Callable[[str], None] = print
) -> list[TableApply]:
    """Apply every change-log row not yet applied to its gold table."""
    ensure_state_tables(spark)
    if not spark.catalog.tableExists(CHANGE_LOG_TABLE):
        raise RuntimeError(f"{CHANGE_LOG_TABLE} does not exist yet: run `lakehouse silver` first")
    up_to = latest_version(spark, CHANGE_LOG_TABLE)
    # One row per gold table: small by construction.
    progress = {r["table_name"]: r["silver_version"] for r in applied_versions(spark).collect()}
    reports = []
    for source, entity in config.tables():
        report = TableApply(table=gold_table_name(entity), source=source.name)
        ensure_gold_table(spark, entity)
        after = int(progress.get(entity.table, -1))
        if after < up_to:
            changes = (
                changes_between(spark, after, up_to)
                .where((F.col("table_name") == entity.table) & (F.col("source") == source.name))
                .persist()
            )
            try:
                report.changes = changes.count()
                if report.changes:
                    apply_table(spark, source, entity, changes, report)
            finally:
                changes.unpersist()
            record_progress(spark, entity.table, up_to)
        report.rows = spark.table(report.table).count()
        log(
            f"gold {report.table}: {report.changes} new changes, +{report.inserted} "
            f"~{report.updated} -{report.deleted}, {report.rows} rows"
            + (f", {report.cast_errors} rows with values that do not cast" if report.cast_errors else "")
        )
        reports.append(report)
    expire_tombstones(spark, config.tombstone_retention_days)
    return reports
