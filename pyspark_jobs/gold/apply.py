"""Gold apply: new change-log rows -> one fold per family -> staged rows -> MERGEs.

A run costs what its changes cost, not what the configuration holds:

1. The change-log rows not applied yet are read once (Delta's change data feed, from the
   least advanced table), materialized, and counted per table in one small job.
2. Each fold family folds all its tables that received changes at once (``table_name``
   is part of every key; ``folds/``), from inputs cut down to the keys the changes touch
   (``fold_inputs.py``); a table with nothing new is not read.
3. The net states of all families, each checked against its table's types
   (``validation.py``), and the SCD2 versions of the touched keys of ``history: true``
   tables are committed once to ``lakehouse.gold_pending`` (``staging.py``) before
   anything else is written.
4. From the staged rows: one MERGE of the rejected states and versions into
   ``lakehouse.gold_rejects``, one tombstone MERGE, then per gold table with states one
   MERGE (and its history MERGE), run concurrently: commits to different Delta tables do
   not conflict.
5. Progress (and each table's row count, from the MERGE metrics) is recorded for every
   table of the run in one commit.

Every write after step 3 is safe to repeat with the same staged rows, so a run killed
anywhere is finished by the next one before it folds anything new.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.catalog import table_exists
from pyspark_jobs.config import LakehouseConfig
from pyspark_jobs.delta_log import holds_files, latest_version, row_count
from pyspark_jobs.faults import crash_point
from pyspark_jobs.gold.change_feed import (
    CHANGE_LOG_TABLE,
    Progress,
    applied_progress,
    new_changes,
    record_progress,
)
from pyspark_jobs.gold.fold_inputs import gather
from pyspark_jobs.gold.folds import FAMILIES
from pyspark_jobs.gold.folds.events import KEY
from pyspark_jobs.gold.folds.shared import TABLE_WIDE_KEY
from pyspark_jobs.gold.merge import (
    MergeMetrics,
    expire_tombstones,
    insert_into_empty_gold,
    merge_into_gold,
    merge_tombstones,
    record_rejects,
    typed_rows,
)
from pyspark_jobs.gold.scd2_history import (
    ensure_history_table,
    history_table_name,
    insert_into_empty_history,
    merge_history,
    typed_versions,
    versions,
)
from pyspark_jobs.gold.staging import (
    HISTORY_KEY,
    PENDING_TABLE,
    STATE,
    VERSION,
    StagedRun,
    ensure_pending_table,
    run_rows,
    stage,
    staged_rows,
    unfinished_run,
)
from pyspark_jobs.gold.table_specs import GoldTable, gold_tables
from pyspark_jobs.gold.tables import (
    GOLD_SCHEMA,
    PROGRESS_TABLE,
    REJECTS_TABLE,
    TOMBSTONES_TABLE,
    ensure_gold_table,
    ensure_state_tables,
)
from pyspark_jobs.gold.validation import reject_reason
from pyspark_jobs.job_names import named_jobs
from pyspark_jobs.materialize import materialized
from pyspark_jobs.session import temporary_conf
from pyspark_jobs.small_inputs import interpreted_when_small
from pyspark_jobs.snapshots import load_snapshots

# MERGEs in flight at once: each is mostly driver-side planning and Delta log work for a
# few rows, so a few overlap well even on two cores.
MERGE_THREADS = 4
# A history version's own columns, as ``versions`` names them -> as staged beside the
# states (``_event_ts`` there is its start).
STAGED_VERSION_COLUMNS = {
    "valid_from": "_valid_from",
    "valid_to": "_valid_to",
    "is_current": "_is_current",
}
# Gold tables created (or given new columns) at once, on a new lake or a changed config.
LAYOUT_THREADS = 4
# On small tables a MERGE rewrites the few small files it touches: cheaper than writing
# and then reading deletion vectors (a MERGE of 3 rows 1.7 -> 1.2 s, docs/gold.md).
# Large tables keep deletion vectors: a few rows changed in a big file must not copy the
# rest of it (tests/gold/test_merge_files.py).
DELETION_VECTORS_KEY = "spark.databricks.delta.merge.deletionVectors.persistent"
SMALL_TABLE_MERGES = {DELETION_VECTORS_KEY: "false"}
# Every write of a run reads the staged rows, already fixed: a local checkpoint of what was
# committed (``staging.stage``), or the pending table read at the run's version. Delta's
# MERGE would copy its source once more before each MERGE (its "materialize source" job:
# a checkpoint is not a Delta scan, so it cannot tell the rows will not change), 40 to
# 120 ms a table in a warm cycle (docs/performance.md). Kept when set from outside.
MERGE_SOURCE_KEY = "spark.databricks.delta.merge.materializeSource"
# A run whose staged rows number at least this share of the rows its MERGEs' tables hold
# rewrites their touched files instead of writing deletion vectors: when most rows of
# every file change, copying the few others costs less than a vector per file written
# now and applied by every later read (a batch of 150,000 changes into 200,000 rows, the
# apply 20.0 to 22.1 s -> 17.8 to 18.1 s, docs/performance.md). Deletion vectors are a
# session setting and the run's MERGEs share the session, so the choice is the run's.
REWRITE_FILES_SHARE = 0.5


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


@dataclass(frozen=True)
class FamilyFold:
    """What one family's fold decided: net states (with ``_reject_reason``), the SCD2
    versions of its history tables' touched keys (with ``_reject_reason``), and those
    keys (their history is rewritten to exactly these versions)."""

    states: DataFrame
    versions: DataFrame | None = None
    history_keys: DataFrame | None = None


def with_reject_reason(frame: DataFrame, specs: DataFrame, types: tuple[str, ...]) -> DataFrame:
    """``frame`` (net-state columns) with the reason it may not be merged, or null."""
    joined = frame.join(
        F.broadcast(specs.select("table_name", "key_columns", "value_columns", "types")),
        "table_name",
    )
    return joined.select(*frame.columns, reject_reason(types).alias("_reject_reason"))


def fold_family(
    spark: SparkSession,
    family_name: str,
    tables: Sequence[GoldTable],
    new: DataFrame,
    up_to: int,
    truncated: Collection[str] = (),
    related: Sequence[GoldTable] | None = None,
    whole_log: Collection[str] = (),
) -> FamilyFold:
    """Fold the new changes ``new`` of ``tables`` (all of one family) up to ``up_to``.

    ``truncated``, ``related``, ``whole_log``: see ``fold_inputs.gather``.
    """
    family = FAMILIES[family_name]
    inputs = gather(spark, family, tables, new, up_to, truncated, related, whole_log)
    states = with_reject_reason(family.fold(inputs), inputs.specs, inputs.types)
    history_tables = [t.table for t in tables if t.entity.history]
    if not history_tables or inputs.histories is None:
        return FamilyFold(states)
    own = inputs.histories.where(F.col("table_name").isin(*history_tables))
    kept = versions(family.states(own, inputs.specs)).select(
        *KEY,
        F.lit(True).alias("_live"),
        "_image",
        "_seq",
        "_change_id",
        F.col("valid_from").alias("_event_ts"),
        *[F.col(c).alias(staged) for c, staged in STAGED_VERSION_COLUMNS.items()],
    )
    return FamilyFold(
        states, with_reject_reason(kept, inputs.specs, inputs.types), own.select(*KEY)
    )


def _touched(
    tables: Sequence[GoldTable], family_name: str, with_changes: set[str]
) -> list[GoldTable]:
    """The family's tables a run must fold: those with new changes; for a family that
    derives events, every table of a source with a new change (cascades cross tables)."""
    own = [t for t in tables if t.family == family_name]
    if FAMILIES[family_name].derives_events:
        return related_tables(own, [t for t in own if t.table in with_changes])
    return [t for t in own if t.table in with_changes]


def related_tables(tables: Sequence[GoldTable], chosen: Sequence[GoldTable]) -> list[GoldTable]:
    """The tables of ``tables`` of the same family and source as one of ``chosen``."""
    wanted = {(t.family, t.source.name) for t in chosen}
    return [t for t in tables if (t.family, t.source.name) in wanted]


def _union(frames: list[DataFrame | None]) -> DataFrame | None:
    present = [f for f in frames if f is not None]
    return functools.reduce(DataFrame.unionByName, present) if present else None


def fold_and_stage(
    spark: SparkSession,
    behind: Sequence[GoldTable],
    new: DataFrame,
    up_to: int,
    reports: dict[str, TableApply],
    whole_log: Collection[str] = (),
) -> StagedRun:
    """Fold the change-log rows ``new`` of ``behind`` (up to change-log version
    ``up_to``) and commit what the folds decided; ``whole_log``: the tables never applied
    (all their change-log rows are in ``new``)."""
    with named_jobs(spark, "gold: read new changes"):
        new = materialized(new)
        # Small by construction: one row per table that received changes.
        counted = (
            new.groupBy("table_name")
            .agg(
                F.count(F.lit(1)).alias("n"),
                F.max("event_ts").alias("newest"),
                F.count_if(
                    (F.col("record_key") == TABLE_WIDE_KEY) & (F.col("op") == "truncate")
                ).alias("truncates"),
            )
            .collect()
        )
    for r in counted:
        reports[r["table_name"]].changes = int(r["n"])
        reports[r["table_name"]].newest_event_ts = r["newest"]
    with_changes = {r["table_name"] for r in counted}
    truncated = {r["table_name"] for r in counted if r["truncates"]}
    touched = {f: _touched(behind, f, with_changes) for f in FAMILIES}
    touched_tables = [t for ts in touched.values() for t in ts]
    with named_jobs(spark, "gold: load snapshots"):
        load_snapshots(
            spark,
            # Merged into even when empty.
            [TOMBSTONES_TABLE, REJECTS_TABLE, CHANGE_LOG_TABLE],
            # A gold or history table without files is appended to (``_write_gold``,
            # ``_write_history``), and no fold scans it.
            unless_empty=[t.name for t in touched_tables]
            + [history_table_name(t.entity) for t in touched_tables if t.entity.history],
        )

    def fold(family_name: str) -> FamilyFold:
        with named_jobs(spark, f"gold: fold inputs of the {family_name} family"):
            return fold_family(
                spark, family_name, touched[family_name], new, up_to, truncated, whole_log=whole_log
            )

    # The families read and materialize their inputs independently; each is mostly the
    # driver planning small queries, so they overlap well.
    families = [f for f in FAMILIES if touched[f]]
    with ThreadPoolExecutor(max_workers=max(1, len(families))) as pool:
        folds = list(pool.map(fold, families))
    with named_jobs(spark, "gold: fold and stage"):
        run = stage(
            spark,
            states=_union([f.states for f in folds]),
            versions=_union([f.versions for f in folds]),
            history_keys=_union([f.history_keys for f in folds]),
            tables=[t.table for t in behind],
            version=up_to,
        )
    crash_point("gold:staged")
    return run


def _write_gold(spark: SparkSession, table: GoldTable, run: StagedRun, counts: Row) -> MergeMetrics:
    """One table's gold MERGE (or first append) from the staged rows."""
    metrics = MergeMetrics()
    mine = staged_rows(spark, run, STATE).where(
        (F.col("table_name") == table.table) & F.col("_reject_reason").isNull()
    )
    rows = typed_rows(mine, table.entity)
    if holds_files(spark, table.name):
        with named_jobs(spark, f"gold: merge {table.name}"):
            metrics = merge_into_gold(spark, rows, table.entity)
    elif counts["live"]:
        # Nothing to match (a first run): the MERGE's inserts as an append, one Spark
        # job instead of seven; what it inserts is counted with the staged rows.
        with named_jobs(spark, f"gold: insert into {table.name}"):
            insert_into_empty_gold(spark, rows, table.entity)
        metrics = MergeMetrics(inserted=int(counts["live"]))
    crash_point(f"gold:merged:{table.table}")
    return metrics


def _write_history(spark: SparkSession, table: GoldTable, run: StagedRun) -> None:
    """One table's SCD2 history MERGE (or first append) from the staged versions."""
    mine = staged_rows(spark, run, VERSION).where(
        (F.col("table_name") == table.table) & F.col("_reject_reason").isNull()
    )
    rows = typed_versions(
        mine.select(
            *KEY,
            "_image",
            "_seq",
            "_change_id",
            *[F.col(staged).alias(c) for c, staged in STAGED_VERSION_COLUMNS.items()],
        ),
        table.entity,
    )
    if holds_files(spark, history_table_name(table.entity)):
        keys = staged_rows(spark, run, HISTORY_KEY).where(F.col("table_name") == table.table)
        with named_jobs(spark, f"gold: history of {table.name}"):
            merge_history(spark, rows, keys.select("_record_key"), table.entity)
    else:
        # Nothing to match or to delete (a first run): the versions as an append.
        with named_jobs(spark, f"gold: insert into the history of {table.name}"):
            insert_into_empty_history(spark, rows, table.entity)
    crash_point(f"gold:history:{table.table}")


def apply_staged(
    spark: SparkSession,
    tables: Sequence[GoldTable],
    run: StagedRun,
    progress: dict[str, Progress],
    reports: dict[str, TableApply],
    resumed: bool = False,
) -> None:
    """Write a staged run into gold: rejects, tombstones, every gold and history table,
    concurrently; then record the run's progress. Safe to repeat; ``resumed``: a repeat
    of a run a crash stopped, whose row counts are read from the tables."""
    states = staged_rows(spark, run, STATE)
    with named_jobs(spark, "gold: count staged rows"):
        # Small by construction: one row per table with staged rows.
        staged = run_rows(spark, run)
        rejected = F.col("_reject_reason").isNotNull()
        is_state = F.col("row_kind") == STATE
        per_table = {
            r["table_name"]: r
            for r in staged.groupBy("table_name")
            .agg(
                F.count_if(is_state & ~rejected).alias("merged"),
                F.count_if(is_state & ~rejected & F.col("_live")).alias("live"),
                F.count_if(is_state & rejected).alias("rejected"),
                F.count_if(is_state & ~rejected & F.col("_tomb_seq").isNotNull()).alias("tombs"),
                F.count_if((F.col("row_kind") == VERSION) & rejected).alias("rejected_versions"),
                F.count_if(F.col("row_kind") == HISTORY_KEY).alias("history_keys"),
            )
            .collect()
        }
    # Every write of the run goes to its own Delta table (commits to different tables do
    # not conflict) and none reads another's output: they run side by side, and a repeat
    # of the run after a crash anywhere among them redoes what did not commit.
    writes: dict[str, Callable[[], MergeMetrics | None]] = {}
    if any(r["rejected"] or r["rejected_versions"] for r in per_table.values()):
        reasons = staged.where(rejected & F.col("row_kind").isin(STATE, VERSION)).select(
            F.when(F.col("row_kind") == VERSION, F.concat("table_name", F.lit("_history")))
            .otherwise(F.col("table_name"))
            .alias("table_name"),
            F.col("_record_key").alias("record_key"),
            F.col("_reject_reason").alias("reason"),
            F.col("_change_id").alias("change_id"),
            F.col("_seq").alias("seq"),
            F.col("_source").alias("source"),
            F.col("_event_ts").alias("event_ts"),
        )

        def rejects() -> None:
            with named_jobs(spark, "gold: rejects"):
                record_rejects(spark, reasons, run.version)
            crash_point("gold:rejects")

        writes["rejects"] = rejects
    if any(r["tombs"] for r in per_table.values()):

        def tombstones() -> None:
            with named_jobs(spark, "gold: tombstones"):
                merge_tombstones(spark, states.where(F.col("_reject_reason").isNull()))
            crash_point("gold:tombstones")

        writes["tombstones"] = tombstones
    in_run = [t for t in tables if t.table in run.tables]
    for t in in_run:
        if (counts := per_table.get(t.table)) is None:
            continue
        if counts["merged"]:
            writes[t.table] = functools.partial(_write_gold, spark, t, run, counts)
        if t.entity.history and counts["history_keys"]:
            writes[f"{t.table} history"] = functools.partial(_write_history, spark, t, run)
    metrics: dict[str, MergeMetrics] = {}
    # Asked once: on a lake from before row counts were kept, a table's is counted.
    rows_before = {t.table: _rows_before(spark, t, progress) for t in in_run}
    settings = {} if spark.conf.get(MERGE_SOURCE_KEY, None) else {MERGE_SOURCE_KEY: "none"}
    if spark.conf.get(DELETION_VECTORS_KEY, None) is None and rewrites_most_rows(
        [(rows_before[t], int(per_table[t]["merged"])) for t in rows_before if t in writes]
    ):
        settings[DELETION_VECTORS_KEY] = "false"
    with (
        temporary_conf(spark, settings),
        ThreadPoolExecutor(max_workers=max(1, min(MERGE_THREADS, len(writes)))) as pool,
    ):
        futures = {name: pool.submit(write) for name, write in writes.items()}
        for name, future in futures.items():
            if isinstance(done := future.result(), MergeMetrics):
                metrics[name] = done
    done_progress: dict[str, Progress] = {}
    for table in in_run:
        done = metrics.get(table.table, MergeMetrics())
        report = reports[table.table]
        report.inserted += done.inserted
        report.updated += done.updated
        report.deleted += done.deleted
        if table.table in per_table:
            report.rejected += int(per_table[table.table]["rejected"])
        if resumed and table.table in metrics:
            # The stopped run may have committed this table's MERGE: its repeat then
            # reports nothing, and the count from before the run would be carried forward.
            report.rows = _rows_now(spark, table)
        else:
            report.rows = rows_before[table.table] + done.inserted - done.deleted
        done_progress[table.table] = Progress(run.version, report.rows, table.signature)
    crash_point("gold:written")
    with named_jobs(spark, "gold: progress"):
        record_progress(spark, done_progress)
    crash_point("gold:progress")


def rewrites_most_rows(merges: Sequence[tuple[int, int]]) -> bool:
    """Whether a run's MERGEs, as (rows the table held before the run, staged rows) per
    table, stage at least ``REWRITE_FILES_SHARE`` of the rows their tables held."""
    # A table that holds nothing yet is appended to, not merged into.
    held = sum(rows for rows, _ in merges if rows)
    staged = sum(merged for rows, merged in merges if rows)
    return held > 0 and staged >= REWRITE_FILES_SHARE * held


def _ensure_layouts(
    spark: SparkSession, tables: Sequence[GoldTable], progress: dict[str, Progress]
) -> list[GoldTable]:
    """Create missing gold (and history) tables and add newly declared columns, only for
    tables whose layout changed since their last run (no snapshot read otherwise); the
    tables concurrently."""
    relaid = [
        table
        for table in tables
        if (known := progress.get(table.table)) is None
        or known.signature != table.signature
        or not table_exists(spark, table.name)
        or (table.entity.history and not table_exists(spark, history_table_name(table.entity)))
    ]
    if not relaid:
        return relaid
    # Once before the pool: every creation also asks for the schema, and the first ones
    # would otherwise race to create it.
    spark.sql(f"create database if not exists {GOLD_SCHEMA}")

    def lay_out(table: GoldTable) -> None:
        ensure_gold_table(spark, table.entity)
        if table.entity.history:
            ensure_history_table(spark, table.entity)

    # Each creation is a catalog call (serialised by the catalog) and a first commit to
    # the table's own log: the commits overlap (docs/gold.md has the figures).
    with ThreadPoolExecutor(max_workers=min(LAYOUT_THREADS, len(relaid))) as pool:
        list(pool.map(lay_out, relaid))
    return relaid


def _rows_before(spark: SparkSession, table: GoldTable, progress: dict[str, Progress]) -> int:
    """The table's row count before a run, from its progress (MERGE metrics)."""
    before = progress.get(table.table)
    if before is None:
        return 0
    if before.row_count is None:
        # A lake from before row counts were kept: counted once, then carried forward.
        return _rows_now(spark, table)
    return before.row_count


def _rows_now(spark: SparkSession, table: GoldTable) -> int:
    """The table's row count, from its log (counted from its rows if the log cannot
    tell)."""
    from_log = row_count(spark, table.name)
    return spark.table(table.name).count() if from_log is None else from_log


def _interpreted_if_small(
    spark: SparkSession, applying: Sequence[GoldTable], log: Callable[[str], None]
) -> AbstractContextManager[bool]:
    """``interpreted_when_small`` over what applying changes to ``applying`` reads: the
    change log, the state tables, those tables and their history tables. Asked only when
    there is something to apply: each table is a catalog lookup and a log listing the
    first time in a run, and a cycle of ``run --every`` that brings nothing asked all of
    them for nothing (docs/performance.md)."""
    read = [CHANGE_LOG_TABLE, PENDING_TABLE, PROGRESS_TABLE, REJECTS_TABLE, TOMBSTONES_TABLE]
    read += [t.name for t in applying]
    read += [history_table_name(t.entity) for t in applying if t.entity.history]
    return interpreted_when_small(spark, "gold", read, log, SMALL_TABLE_MERGES)


def apply_gold(
    spark: SparkSession, config: LakehouseConfig, log: Callable[[str], None] = print
) -> list[TableApply]:
    """Apply every change-log row not yet applied to its gold table (without code
    generation, and with MERGEs that rewrite what they touch, when every table the apply
    reads is small: ``small_inputs.py``)."""
    with named_jobs(spark, "gold: state tables and progress"):
        ensure_state_tables(spark)
        ensure_pending_table(spark)
        if not table_exists(spark, CHANGE_LOG_TABLE):
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
        finishing = [t for t in tables if t.table in unfinished.tables]
        with _interpreted_if_small(spark, finishing, log):
            apply_staged(spark, tables, unfinished, progress, reports, resumed=True)
        progress = applied_progress(spark)
    with named_jobs(spark, "gold: change-log version"):
        up_to = latest_version(spark, CHANGE_LOG_TABLE)
    behind = [t for t in tables if progress.get(t.table, Progress(-1)).version < up_to]
    if behind:
        applied = {t: p.version for t, p in progress.items()}
        new = new_changes(spark, applied, [t.table for t in behind], up_to)
        never = [t.table for t in behind if applied.get(t.table, -1) < 0]
        with _interpreted_if_small(spark, behind, log):
            run = fold_and_stage(spark, behind, new, up_to, reports, never)
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
    with (
        named_jobs(spark, "gold: expire tombstones"),
        interpreted_when_small(spark, "gold", [TOMBSTONES_TABLE]),
    ):
        expire_tombstones(spark, config.tombstone_retention_days)
    return [reports[t.table] for t in tables]
