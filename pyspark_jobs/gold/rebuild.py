"""Rebuild one gold table (and its history) from the change log, from nothing.

The table is replaced by an empty one with the declared layout (a new version of the same
Delta table: time travel and the change data feed still see what it held before).

The repair after a config fix (a declared type that made states land in
``lakehouse.gold_rejects``, a column added to ``history: true``) or a hand edit: the
table's rows, history and tombstones are recomputed from every change silver holds for
it, exactly as the incremental runs would have built them.

A key whose rebuilt state is still rejected keeps its row from before the rebuild, as an
incremental run keeps a key's last good state: the row is read from the table's Delta
version before the rebuild, staged as the key's state and merged with the others. That
version is recorded in ``lakehouse.gold_rebuilds`` before the table is replaced, so a
rebuild cut short (killed, or failed) is finished from the same version by the next
``lakehouse gold``, ``lakehouse run`` or rebuild (``apply_gold_finishing_rebuilds``),
never started again from the half-rebuilt table.
"""

from __future__ import annotations

from collections.abc import Callable

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.catalog import table_exists
from pyspark_jobs.config import ConfigError, LakehouseConfig
from pyspark_jobs.delta_log import latest_version
from pyspark_jobs.faults import crash_point
from pyspark_jobs.gold.apply import (
    TableApply,
    apply_gold,
    apply_staged,
    fold_family,
    related_tables,
    with_reject_reason,
)
from pyspark_jobs.gold.change_feed import (
    CHANGE_LOG_TABLE,
    Progress,
    change_log_as_of,
    record_progress,
)
from pyspark_jobs.gold.folds import FAMILIES
from pyspark_jobs.gold.images import table_images
from pyspark_jobs.gold.merge import typed_rows
from pyspark_jobs.gold.scd2_history import create_history_table
from pyspark_jobs.gold.staging import stage
from pyspark_jobs.gold.table_specs import GoldTable, gold_tables, specs_frame
from pyspark_jobs.gold.tables import SEQ_TYPE, TOMBSTONES_TABLE, create_gold_table
from pyspark_jobs.gold.typed_values import declared_types
from pyspark_jobs.materialize import materialized
from pyspark_jobs.storage import create_table_if_missing

REBUILDS_TABLE = "lakehouse.gold_rebuilds"


def _find(tables: list[GoldTable], name: str, config: LakehouseConfig) -> GoldTable:
    wanted = name.removeprefix("gold.")
    for table in tables:
        if table.table == wanted:
            return table
    known = ", ".join(t.table for t in tables)
    raise ConfigError(f"{config.path}: no gold table named {name!r} (known: {known})")


def ensure_rebuilds_table(spark: SparkSession) -> None:
    """Create ``lakehouse.gold_rebuilds`` if missing."""
    spark.sql("create database if not exists lakehouse")
    create_table_if_missing(
        spark,
        REBUILDS_TABLE,
        f"""
        create table if not exists {REBUILDS_TABLE} (
            table_name string not null,
            prior_version bigint not null comment 'the gold table before the rebuild',
            finished boolean not null,
            at timestamp not null
        ) using delta
        comment 'Gold rebuilds: a started one that did not finish is finished by the next'
        """,
    )


def record_rebuild(spark: SparkSession, table: str, prior_version: int, finished: bool) -> None:
    """Append that the rebuild of gold ``table`` from ``prior_version`` started or finished."""
    spark.createDataFrame(
        [(table, prior_version, finished)],
        "table_name string, prior_version bigint, finished boolean",
    ).select("*", F.current_timestamp().alias("at")).write.format("delta").mode(
        "append"
    ).saveAsTable(REBUILDS_TABLE)


def unfinished_rebuilds(spark: SparkSession) -> dict[str, int]:
    """Gold table -> the version it was rebuilt from, for each rebuild that started and
    did not finish (one row per table: small)."""
    if not table_exists(spark, REBUILDS_TABLE):
        return {}
    latest = (
        spark.table(REBUILDS_TABLE)
        .groupBy("table_name")
        .agg(F.max_by(F.struct("finished", "prior_version"), "at").alias("last"))
        .where(~F.col("last.finished"))
        .collect()
    )
    return {r["table_name"]: int(r["last"]["prior_version"]) for r in latest}


def apply_gold_finishing_rebuilds(
    spark: SparkSession, config: LakehouseConfig, log: Callable[[str], None] = print
) -> list[TableApply]:
    """``apply_gold``, after finishing any rebuild that was cut short (the gold step of
    ``lakehouse gold`` and ``lakehouse run``)."""
    known = {t.table for t in gold_tables(config)}
    for table in sorted(unfinished_rebuilds(spark)):
        if table in known:
            log(f"gold gold.{table}: finishing a rebuild that was cut short")
            rebuild_table(spark, config, table, log=log)
        else:
            log(f"gold gold.{table}: a rebuild was cut short, but the config has no such table")
    return apply_gold(spark, config, log=log)


def _prior_states(
    spark: SparkSession,
    table: GoldTable,
    prior_version: int,
    keys: DataFrame,
    soft_deleted: bool = False,
    extra: tuple[str, ...] = (),
) -> DataFrame:
    """The rows of ``table`` as of ``prior_version`` of the ``keys`` (``table_name``,
    ``_record_key``) as live net states, checked against the declared types (a row the
    corrected layout cannot hold is rejected, not written altered); ``soft_deleted``,
    ``extra``: see ``table_images``."""
    prior = table_images(
        spark, table, version=prior_version, soft_deleted=soft_deleted, extra=extra
    ).join(keys, ["table_name", "_record_key"], "left_semi")
    return with_reject_reason(
        prior.withColumn("_live", F.lit(True)).withColumn("_tomb_seq", F.lit(None).cast(SEQ_TYPE)),
        specs_frame(spark, [table]),
        declared_types([table.entity]),
    )


def _restore_soft_deleted(
    spark: SparkSession,
    table: GoldTable,
    prior_version: int,
    states: DataFrame,
    log: Callable[[str], None],
) -> None:
    """Write into the emptied ``table`` its soft-deleted rows as of ``prior_version`` whose
    keys the rebuilt ``states`` delete or reject, as they were (values as last live, the
    delete's time): the incremental runs kept them, and a rebuild, which folds each key's
    whole life at once, has no live state to flag deleted. The rebuild's MERGE then
    leaves them as they are, or records a later delete."""
    keys = states.where(~F.col("_live") | F.col("_reject_reason").isNotNull())
    checked = materialized(
        _prior_states(
            spark,
            table,
            prior_version,
            keys.select("table_name", "_record_key"),
            soft_deleted=True,
            extra=("_deleted_at",),
        )
    )
    valid = checked.where(F.col("_reject_reason").isNull())
    # The emptied table holds none of these keys: an append in the table's column order.
    typed_rows(valid, table.entity).join(
        valid.select("_record_key", "_deleted_at"), "_record_key"
    ).withColumn("_deleted", F.lit(True)).select(*spark.table(table.name).columns).write.insertInto(
        table.name
    )
    # Few rows by construction: soft-deleted rows the declared types cannot hold.
    lost = checked.where(F.col("_reject_reason").isNotNull()).count()
    if lost:
        log(
            f"gold {table.name}: {lost} soft-deleted rows not kept: their last live values "
            "do not cast to the declared types"
        )


def rebuild_table(
    spark: SparkSession, config: LakehouseConfig, name: str, log: Callable[[str], None] = print
) -> TableApply:
    """Empty ``gold.<name>`` (its history and tombstones too) and fold it again from every
    change of the change log; every other table is brought up to date first. A key whose
    state is rejected keeps its row from before the rebuild."""
    tables = gold_tables(config)
    table = _find(tables, name, config)
    ensure_rebuilds_table(spark)
    prior_version = unfinished_rebuilds(spark).get(table.table)
    apply_gold(spark, config, log=log)
    if prior_version is None:
        # The table as the incremental runs left it, before the rebuild changes anything:
        # the rows its rejected keys keep.
        prior_version = latest_version(spark, table.name)
        record_rebuild(spark, table.table, prior_version, finished=False)
    else:
        log(f"gold {table.name}: rebuilding again, from version {prior_version}")
    # Progress goes back first: a rebuild killed half-way leaves a table that the next
    # run (or rebuild) folds again from the start, never one marked complete.
    record_progress(spark, {table.table: Progress(-1, 0, table.signature)})
    # Replaced, not only emptied: the rebuilt table takes the declared layout, so a
    # corrected column type applies too.
    create_gold_table(spark, table.entity, replace=True)
    if table.entity.history:
        create_history_table(spark, table.entity, replace=True)
    DeltaTable.forName(spark, TOMBSTONES_TABLE).delete(F.col("table_name") == table.table)
    crash_point(f"gold:rebuild:replaced:{table.table}")
    version = latest_version(spark, CHANGE_LOG_TABLE)
    # Every change of the table is new to it. A key of a family that derives events may
    # also owe them to other tables of its source (implicit vertices, cascades): every
    # table of the source folds, only this one is kept.
    related = related_tables(tables, [table]) if FAMILIES[table.family].derives_events else [table]
    names = [t.table for t in related]
    changes = materialized(
        change_log_as_of(spark, version).where(
            (F.col("source") == table.source.name) & F.col("table_name").isin(*names)
        )
    )
    # Every key of the table is touched: as for a truncate.
    whole = [t.table for t in related]
    folded = fold_family(
        spark, table.family, related, changes, version, whole, related, whole_log=whole
    )
    mine = F.col("table_name") == table.table
    states = materialized(folded.states.where(mine))
    if table.entity.soft_delete:
        _restore_soft_deleted(spark, table, prior_version, states, log)
    run = stage(
        spark,
        # A key whose state is still rejected keeps its last good row, as in the runs.
        states=states.unionByName(
            _prior_states(
                spark,
                table,
                prior_version,
                states.where(F.col("_reject_reason").isNotNull()).select(
                    "table_name", "_record_key"
                ),
            )
        ),
        versions=None if folded.versions is None else folded.versions.where(mine),
        history_keys=None if folded.history_keys is None else folded.history_keys.where(mine),
        tables=[table.table],
        version=version,
    )
    report = TableApply(table=table.name, source=table.source.name)
    apply_staged(
        spark, tables, run, {table.table: Progress(-1, 0, table.signature)}, {table.table: report}
    )
    crash_point(f"gold:rebuild:applied:{table.table}")
    record_rebuild(spark, table.table, prior_version, finished=True)
    log(
        f"gold {table.name}: rebuilt from change-log version {version}, {report.rows} rows"
        + (f", {report.rejected} states rejected" if report.rejected else "")
    )
    return report
