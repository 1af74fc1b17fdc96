"""Gold apply job: new change-log rows -> fold per key -> one MERGE per gold table.

Which fold a table gets (``fold_family``):

- ``graph`` (TigerGraph vertices and edges) and ``document`` (entity-patches): ops that
  do not commute, so every key with a new change is re-folded from its full history in
  the change log (as of the version being applied), plus TigerGraph's silent cascades;
- ``cells`` (Cassandra): per-cell last-write-wins against the gold row and tombstone;
- ``rows`` (every other format): highest ``seq`` wins against the gold row and tombstone.

The change feed is read once per run (from the least advanced table) and cached; each
table filters it by its own progress.
"""

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
    change_log_as_of,
    changes_between,
    latest_version,
    record_progress,
)
from pyspark_jobs.gold.document_patch import fold_documents
from pyspark_jobs.gold.graph_cascades import edge_cascade_deletes, implicit_vertices
from pyspark_jobs.gold.history_events import affected_events, as_events, expand_truncates
from pyspark_jobs.gold.merge import (
    current_images,
    expire_tombstones,
    merge_into_gold,
    merge_tombstones,
    record_cast_failures,
    typed_rows,
)
from pyspark_jobs.gold.op_fold import changed_states, fold_history
from pyspark_jobs.gold.row_fold import fold_rows
from pyspark_jobs.gold.scd2_history import ensure_history_table, merge_history
from pyspark_jobs.gold.tables import (
    TOMBSTONES_TABLE,
    ensure_gold_table,
    ensure_state_tables,
    gold_table_name,
)

REFOLD_FAMILIES = ("graph", "document")


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


def fold_family(source: Source, entity: Entity) -> str:
    """``graph``, ``document``, ``cells`` or ``rows``: how this table's changes fold."""
    if entity.kind in ("vertex", "edge") or source.format == "tigergraph":
        return "graph"
    if entity.kind == "document" or source.format == "debezium_patch":
        return "document"
    if source.format == "cassandra":
        return "cells"
    return "rows"


def history_of_affected_keys(
    entity: Entity, source_history: DataFrame, new_change_ids: DataFrame
) -> DataFrame:
    """Events of every key of ``entity`` that a new change (or its cascade) touches."""
    own = as_events(source_history.where(F.col("table_name") == entity.table))
    if entity.kind == "vertex":
        own = own.unionByName(implicit_vertices(entity.name, entity.key[0], source_history))
    events = expand_truncates(own)
    if entity.kind == "edge":
        events = events.unionByName(edge_cascade_deletes(events, source_history))
    return affected_events(events, new_change_ids)


def fold_changes(
    source: Source,
    entity: Entity,
    changes: DataFrame,
    current: DataFrame,
    tombstones: DataFrame,
    source_history: DataFrame | None = None,
) -> DataFrame:
    """The net state per touched key, by the fold the table's family needs.

    ``changes``: the table's new change-log rows; for the re-fold families, the new rows
    of the whole source (their ``change_id`` marks the affected keys) and
    ``source_history`` the source's full change log.
    """
    family = fold_family(source, entity)
    if family in REFOLD_FAMILIES:
        assert source_history is not None, "re-fold families need the source's history"
        events = history_of_affected_keys(entity, source_history, changes.select("change_id"))
        if family == "graph":
            net = fold_history(events, entity.columns, list(entity.value_columns))
        else:
            net = fold_documents(events, list(entity.value_columns))
        return changed_states(net, current)
    if family == "cells":
        return fold_cells(changes, current, tombstones, list(entity.value_columns))
    return fold_rows(changes, current, tombstones)


def apply_table(
    spark: SparkSession,
    source: Source,
    entity: Entity,
    changes: DataFrame,
    report: TableApply,
    source_history: DataFrame | None = None,
) -> None:
    """Fold and MERGE one table's new changes (and its history table, cast failures)."""
    tombstones = spark.table(TOMBSTONES_TABLE).where(F.col("table_name") == entity.table)
    net = fold_changes(
        source, entity, changes, current_images(spark, entity), tombstones, source_history
    )
    # Materialised with its lineage cut: a persisted plan would be re-computed after the
    # tombstone MERGE below (Spark re-caches plans that read a written table), and the
    # re-computed fold would then see its own new tombstones and lose to them.
    rows = typed_rows(net, entity).localCheckpoint(eager=True)
    try:
        # One job for the three numbers that decide which writes are needed.
        counts = rows.agg(
            F.count("*").alias("n"),
            F.count_if(F.col("_tomb_seq").isNotNull()).alias("tombs"),
            F.count_if(F.size("_cast_errors") > 0).alias("failed"),
        ).first()
        assert counts is not None
        if not counts["n"]:
            return
        report.cast_errors = counts["failed"]
        if counts["failed"]:
            record_cast_failures(spark, rows, entity)
        if counts["tombs"]:
            merge_tombstones(spark, rows, entity)
        metrics = merge_into_gold(spark, rows, entity)
        if entity.history:
            merge_history(spark, rows, entity)
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
    tables = config.tables()
    behind = {e.table: int(progress.get(e.table, -1)) for _, e in tables}
    start = min(behind.values(), default=up_to)
    new = changes_between(spark, start, up_to).persist()
    # Small metadata: how many new rows per (source, table, commit version).
    counts = [
        (r["source"], r["table_name"], r["_commit_version"], r["n"])
        for r in new.groupBy("source", "table_name", "_commit_version")
        .agg(F.count("*").alias("n"))
        .collect()
    ]
    reports, applied = [], []
    try:
        for source, entity in tables:
            report = TableApply(table=gold_table_name(entity), source=source.name)
            ensure_gold_table(spark, entity)
            if entity.history:
                ensure_history_table(spark, entity)
            after = behind[entity.table]
            if after < up_to:
                family = fold_family(source, entity)
                report.changes = sum(
                    n
                    for s, t, v, n in counts
                    if s == source.name and t == entity.table and v > after
                )
                source_news = sum(n for s, _, v, n in counts if s == source.name and v > after)
                new_here = new.where(
                    (F.col("source") == source.name) & (F.col("_commit_version") > after)
                )
                if family in REFOLD_FAMILIES and source_news:
                    history = change_log_as_of(spark, up_to).where(F.col("source") == source.name)
                    apply_table(spark, source, entity, new_here, report, history)
                elif report.changes:
                    changes = new_here.where(F.col("table_name") == entity.table)
                    apply_table(spark, source, entity, changes, report)
                applied.append(entity.table)
            report.rows = spark.table(report.table).count()
            log(
                f"gold {report.table}: {report.changes} new changes, +{report.inserted} "
                f"~{report.updated} -{report.deleted}, {report.rows} rows"
                + (
                    f", {report.cast_errors} rows with values that do not cast"
                    if report.cast_errors
                    else ""
                )
            )
            reports.append(report)
    finally:
        new.unpersist()
    record_progress(spark, applied, up_to)
    expire_tombstones(spark, config.tombstone_retention_days)
    return reports
