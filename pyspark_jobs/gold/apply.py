"""Gold apply: new change-log rows -> one fold per family -> staged states -> MERGEs.

A run costs what its changes cost, not what the configuration holds:

1. The change-log rows not applied yet are read once (Delta's change data feed, from the
   least advanced table) and counted per table in one small job.
2. Each fold family folds all its tables that received changes at once (``table_name``
   is part of every key; ``folds/``); a table with nothing new is not read.
3. The net states of all families, each checked against its table's types
   (``validation.py``), are committed once to ``lakehouse.gold_pending``
   (``staging.py``) before anything else is written.
4. From the staged states: one append of the diverted states to ``lakehouse.gold_rejects``,
   one tombstone MERGE, then one MERGE per gold table with states (and its SCD2 history
   table), run concurrently: commits to different Delta tables do not conflict.
5. Progress (and each table's row count, from the MERGE metrics) is recorded for every
   table of the run in one commit.

Every write after step 3 is safe to repeat with the same staged states, so a run killed
anywhere is finished by the next one (``finish_staged_run``) before it folds anything new.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.config import LakehouseConfig
from pyspark_jobs.faults import crash_point
from pyspark_jobs.gold.change_feed import (
    CHANGE_LOG_TABLE,
    Progress,
    applied_progress,
    change_log_as_of,
    latest_version,
    new_changes,
    record_progress,
)
from pyspark_jobs.gold.folds import FAMILIES, FoldInputs
from pyspark_jobs.gold.folds.events import affected_events, sorted_history
from pyspark_jobs.gold.folds.shared import NET_STATE_SCHEMA
from pyspark_jobs.gold.images import current_images
from pyspark_jobs.gold.merge import (
    MergeMetrics,
    expire_tombstones,
    merge_into_gold,
    merge_tombstones,
    record_rejects,
    typed_rows,
)
from pyspark_jobs.gold.scd2_history import (
    ensure_history_table,
    merge_history,
    typed_versions,
    versions,
)
from pyspark_jobs.gold.staging import (
    StagedRun,
    ensure_pending_table,
    stage,
    staged_states,
    unfinished_run,
)
from pyspark_jobs.gold.table_specs import GoldTable, gold_tables, specs_frame
from pyspark_jobs.gold.tables import TOMBSTONES_TABLE, ensure_gold_table, ensure_state_tables
from pyspark_jobs.gold.typed_values import declared_types
from pyspark_jobs.gold.validation import reject_reason
from pyspark_jobs.job_names import named_jobs

# MERGEs in flight at once: each is mostly driver-side planning and Delta log work for a
# few rows, so a few overlap well even on two cores.
MERGE_THREADS = 4


@dataclass
class TableApply:
    """What one gold table received in a run."""

    table: str
    source: str
    changes: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    rejected: int = 0
    rows: int | None = None
    newest_event_ts: datetime | None = None


def fold_family_states(
    spark: SparkSession,
    family_name: str,
    tables: Sequence[GoldTable],
    new: DataFrame,
    up_to: int,
) -> DataFrame:
    """Net states (with their reject reason) of ``tables``, all of one family."""
    family = FAMILIES[family_name]
    specs = specs_frame(spark, tables)
    names = F.broadcast(specs.select("table_name"))
    types = declared_types(t.entity for t in tables)
    history = None
    if family.refolds:
        sources = sorted({t.source.name for t in tables})
        history = change_log_as_of(spark, up_to).where(F.col("source").isin(*sources))
    inputs = FoldInputs(
        changes=new.join(names, "table_name"),
        current=current_images(spark, tables),
        tombstones=spark.table(TOMBSTONES_TABLE).join(names, "table_name"),
        specs=specs,
        types=types,
        history=history,
    )
    states = family.fold(inputs)
    checked = states.join(
        F.broadcast(specs.select("table_name", "key_columns", "value_columns", "types")),
        "table_name",
    )
    return checked.select(*states.columns, reject_reason(types).alias("_reject_reason"))


def _touched(
    tables: Sequence[GoldTable], family_name: str, with_changes: set[str]
) -> list[GoldTable]:
    """The family's tables a run must fold: those with new changes; for the re-fold
    families every table of a source with a new change (cascades cross tables)."""
    own = [t for t in tables if t.family == family_name]
    if FAMILIES[family_name].refolds:
        sources = {t.source.name for t in own if t.table in with_changes}
        return [t for t in own if t.source.name in sources]
    return [t for t in own if t.table in with_changes]


def fold_and_stage(
    spark: SparkSession,
    behind: Sequence[GoldTable],
    applied: dict[str, int],
    up_to: int,
    reports: dict[str, TableApply],
) -> StagedRun:
    """Fold every change of ``behind`` up to ``up_to`` and commit the net states."""
    new = new_changes(spark, applied, [t.table for t in behind], up_to).persist()
    try:
        # Small by construction: one row per table that received changes.
        with named_jobs(spark, "gold: count new changes"):
            counted = (
                new.groupBy("table_name")
                .agg(F.count(F.lit(1)).alias("n"), F.max("event_ts").alias("newest"))
                .collect()
            )
        for r in counted:
            reports[r["table_name"]].changes = int(r["n"])
            reports[r["table_name"]].newest_event_ts = r["newest"]
        with_changes = {name for name, r in reports.items() if r.changes}
        folded = []
        for family_name in FAMILIES:
            touched = _touched(behind, family_name, with_changes)
            if touched:
                folded.append(fold_family_states(spark, family_name, touched, new, up_to))
        states = (
            functools.reduce(DataFrame.unionByName, folded)
            if folded
            else spark.createDataFrame([], f"{NET_STATE_SCHEMA}, _reject_reason string")
        )
        with named_jobs(spark, "gold: fold and stage"):
            run = stage(spark, states, [t.table for t in behind], up_to)
        crash_point("gold:staged")
        return run
    finally:
        new.unpersist()


def _history(
    spark: SparkSession,
    table: GoldTable,
    tables: Sequence[GoldTable],
    new_change_ids: DataFrame,
    run: StagedRun,
) -> None:
    """Rebuild the SCD2 history of the keys a run touched in ``table``."""
    family = FAMILIES[table.family]
    # The events of a key may come from other tables of its source (graph cascades).
    related = [t for t in tables if t.family == table.family and t.source == table.source]
    specs = specs_frame(spark, related)
    log = change_log_as_of(spark, run.version).where(F.col("source") == table.source.name)
    events = affected_events(family.events(log, specs), new_change_ids).where(
        F.col("table_name") == table.table
    )
    states = family.states(sorted_history(events), specs)
    rows = typed_versions(versions(states), table.entity).persist()
    try:
        rejected = rows.where(F.col("_problems").isNotNull())
        if rejected.limit(1).count():
            record_rejects(
                spark,
                rejected.select(
                    F.lit(f"{table.table}_history").alias("table_name"),
                    F.col("_record_key").alias("record_key"),
                    F.col("_problems").alias("reason"),
                    F.col("_change_id").alias("change_id"),
                    F.col("_seq").alias("seq"),
                    F.lit(table.source.name).alias("source"),
                    F.col("valid_from").alias("event_ts"),
                ),
                run.version,
            )
            crash_point(f"gold:history-rejects:{table.table}")
        merge_history(
            spark,
            rows.where(F.col("_problems").isNull()),
            states.select("_record_key"),
            table.entity,
        )
    finally:
        rows.unpersist()


def _apply_table(
    spark: SparkSession,
    table: GoldTable,
    states: DataFrame,
    has_states: bool,
    tables: Sequence[GoldTable],
    new_change_ids: DataFrame | None,
    run: StagedRun,
) -> MergeMetrics:
    metrics = MergeMetrics()
    if has_states:
        mine = states.where((F.col("table_name") == table.table) & F.col("_reject_reason").isNull())
        with named_jobs(spark, f"gold: merge {table.name}"):
            metrics = merge_into_gold(spark, typed_rows(mine, table.entity), table.entity)
        crash_point(f"gold:merged:{table.table}")
    if table.entity.history and new_change_ids is not None:
        with named_jobs(spark, f"gold: history of {table.name}"):
            _history(spark, table, tables, new_change_ids, run)
        crash_point(f"gold:history:{table.table}")
    return metrics


def apply_staged(
    spark: SparkSession,
    tables: Sequence[GoldTable],
    run: StagedRun,
    progress: dict[str, Progress],
    reports: dict[str, TableApply],
    new_change_ids: DataFrame | None = None,
) -> None:
    """Write a staged run into gold: rejects, tombstones, then every table concurrently;
    then record the run's progress. Safe to repeat.

    ``new_change_ids``: the changes the run applied (history tables rebuild the keys they
    touch); by default read from the change data feed after each table's progress.
    """
    states = staged_states(spark, run)
    # Small by construction: one row per table with states.
    with named_jobs(spark, "gold: count staged states"):
        per_table = {
            r["table_name"]: r
            for r in states.groupBy("table_name")
            .agg(
                F.count_if(F.col("_reject_reason").isNull()).alias("merged"),
                F.count_if(F.col("_reject_reason").isNotNull()).alias("rejected"),
                F.count_if(F.col("_tomb_seq").isNotNull() & F.col("_reject_reason").isNull()).alias(
                    "tombs"
                ),
            )
            .collect()
        }
    if any(r["rejected"] for r in per_table.values()):
        with named_jobs(spark, "gold: rejects"):
            record_rejects(
                spark,
                states.where(F.col("_reject_reason").isNotNull()).select(
                    "table_name",
                    F.col("_record_key").alias("record_key"),
                    F.col("_reject_reason").alias("reason"),
                    F.col("_change_id").alias("change_id"),
                    F.col("_seq").alias("seq"),
                    F.col("_source").alias("source"),
                    F.col("_event_ts").alias("event_ts"),
                ),
                run.version,
            )
        crash_point("gold:rejects")
    if any(r["tombs"] for r in per_table.values()):
        with named_jobs(spark, "gold: tombstones"):
            merge_tombstones(spark, states.where(F.col("_reject_reason").isNull()))
        crash_point("gold:tombstones")
    in_run = [t for t in tables if t.table in run.tables]
    if new_change_ids is None and any(t.entity.history for t in in_run):
        applied = {t: p.version for t, p in progress.items()}
        new_change_ids = new_changes(spark, applied, [t.table for t in in_run], run.version).select(
            "change_id"
        )
    merged = {t: int(r["merged"]) for t, r in per_table.items()}
    work = [t for t in in_run if merged.get(t.table) or t.entity.history]
    metrics: dict[str, MergeMetrics] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(MERGE_THREADS, len(work)))) as pool:
        futures = {
            t.table: pool.submit(
                _apply_table,
                spark,
                t,
                states,
                bool(merged.get(t.table)),
                tables,
                new_change_ids,
                run,
            )
            for t in work
        }
        for name, future in futures.items():
            metrics[name] = future.result()
    done_progress: dict[str, Progress] = {}
    for table in in_run:
        done = metrics.get(table.table, MergeMetrics())
        report = reports[table.table]
        report.inserted += done.inserted
        report.updated += done.updated
        report.deleted += done.deleted
        if table.table in per_table:
            report.rejected += int(per_table[table.table]["rejected"])
        report.rows = _rows_before(spark, table, progress) + done.inserted - done.deleted
        done_progress[table.table] = Progress(run.version, report.rows, table.signature)
    crash_point("gold:written")
    with named_jobs(spark, "gold: progress"):
        record_progress(spark, done_progress)
    crash_point("gold:progress")


def _ensure_layouts(
    spark: SparkSession, tables: Sequence[GoldTable], progress: dict[str, Progress]
) -> list[GoldTable]:
    """Create missing gold (and history) tables and add newly declared columns, only for
    tables whose layout changed since their last run (no snapshot read otherwise)."""
    relaid = []
    for table in tables:
        known = progress.get(table.table)
        if (
            known is None
            or known.signature != table.signature
            or not spark.catalog.tableExists(table.name)
        ):
            ensure_gold_table(spark, table.entity)
            if table.entity.history:
                ensure_history_table(spark, table.entity)
            relaid.append(table)
    return relaid


def _rows_before(spark: SparkSession, table: GoldTable, progress: dict[str, Progress]) -> int:
    """The table's row count before a run, from its progress (MERGE metrics)."""
    before = progress.get(table.table)
    if before is None:
        return 0
    if before.row_count is None:
        # A lake from before row counts were kept: counted once, then carried forward.
        return spark.table(table.name).count()
    return before.row_count


def apply_gold(
    spark: SparkSession, config: LakehouseConfig, log: Callable[[str], None] = print
) -> list[TableApply]:
    """Apply every change-log row not yet applied to its gold table."""
    with named_jobs(spark, "gold: state tables and progress"):
        ensure_state_tables(spark)
        ensure_pending_table(spark)
        if not spark.catalog.tableExists(CHANGE_LOG_TABLE):
            raise RuntimeError(
                f"{CHANGE_LOG_TABLE} does not exist yet: run `lakehouse silver` first"
            )
        tables = gold_tables(config)
        reports = {t.table: TableApply(table=t.name, source=t.source.name) for t in tables}
        progress = applied_progress(spark)
        relaid = _ensure_layouts(spark, tables, progress)
        unfinished = unfinished_run(spark, {t: p.version for t, p in progress.items()})
    if unfinished is not None:
        log(
            f"gold: finishing the run staged at change-log version {unfinished.version} "
            f"({len(unfinished.tables)} tables)"
        )
        apply_staged(spark, tables, unfinished, progress, reports)
        progress = applied_progress(spark)
    with named_jobs(spark, "gold: change-log version"):
        up_to = latest_version(spark, CHANGE_LOG_TABLE)
    behind = [t for t in tables if progress.get(t.table, Progress(-1)).version < up_to]
    if behind:
        applied = {t: p.version for t, p in progress.items()}
        run = fold_and_stage(spark, behind, applied, up_to, reports)
        apply_staged(spark, tables, run, progress, reports)
    # Tables whose layout changed but that received nothing: remember the new layout.
    record_progress(
        spark,
        {
            t.table: Progress(progress[t.table].version, progress[t.table].row_count, t.signature)
            for t in relaid
            if t not in behind and t.table in progress
        },
    )
    for table in tables:
        report = reports[table.table]
        if report.rows is None:
            report.rows = _rows_before(spark, table, progress)
        if report.changes or report.inserted or report.updated or report.deleted:
            log(
                f"gold {report.table}: {report.changes} new changes, +{report.inserted} "
                f"~{report.updated} -{report.deleted}, {report.rows} rows"
                + (f", {report.rejected} states rejected" if report.rejected else "")
            )
    with named_jobs(spark, "gold: expire tombstones"):
        expire_tombstones(spark, config.tombstone_retention_days)
    return [reports[t.table] for t in tables]
