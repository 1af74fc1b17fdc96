"""Rebuild one gold table (and its history) from the change log, from nothing.

The table is replaced by an empty one with the declared layout (a new version of the same
Delta table: time travel and the change data feed still see what it held before).

The repair after a config fix (a declared type that made states land in
``lakehouse.gold_rejects``, a column added to ``history: true``) or a hand edit: the
table's rows, history and tombstones are recomputed from every change silver holds for
it, exactly as the incremental runs would have built them.
"""

from __future__ import annotations

from collections.abc import Callable

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.config import ConfigError, LakehouseConfig
from pyspark_jobs.delta_log import latest_version
from pyspark_jobs.gold.apply import (
    TableApply,
    apply_gold,
    apply_staged,
    fold_family,
    related_tables,
)
from pyspark_jobs.gold.change_feed import (
    CHANGE_LOG_TABLE,
    Progress,
    change_log_as_of,
    record_progress,
)
from pyspark_jobs.gold.folds import FAMILIES
from pyspark_jobs.gold.folds.shared import materialized
from pyspark_jobs.gold.scd2_history import create_history_table
from pyspark_jobs.gold.staging import stage
from pyspark_jobs.gold.table_specs import GoldTable, gold_tables
from pyspark_jobs.gold.tables import TOMBSTONES_TABLE, create_gold_table


def _find(tables: list[GoldTable], name: str, config: LakehouseConfig) -> GoldTable:
    wanted = name.removeprefix("gold.")
    for table in tables:
        if table.table == wanted:
            return table
    known = ", ".join(t.table for t in tables)
    raise ConfigError(f"{config.path}: no gold table named {name!r} (known: {known})")


def rebuild_table(
    spark: SparkSession, config: LakehouseConfig, name: str, log: Callable[[str], None] = print
) -> TableApply:
    """Empty ``gold.<name>`` (its history and tombstones too) and fold it again from every
    change of the change log; every other table is brought up to date first."""
    tables = gold_tables(config)
    table = _find(tables, name, config)
    apply_gold(spark, config, log=log)
    # Progress goes back first: a rebuild killed half-way leaves a table that the next
    # run (or rebuild) folds again from the start, never one marked complete.
    record_progress(spark, {table.table: Progress(-1, 0, table.signature)})
    # Replaced, not only emptied: the rebuilt table takes the declared layout, so a
    # corrected column type applies too.
    create_gold_table(spark, table.entity, replace=True)
    if table.entity.history:
        create_history_table(spark, table.entity, replace=True)
    DeltaTable.forName(spark, TOMBSTONES_TABLE).delete(F.col("table_name") == table.table)
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
    folded = fold_family(spark, table.family, related, changes, version, whole, related)
    mine = F.col("table_name") == table.table
    run = stage(
        spark,
        states=folded.states.where(mine),
        versions=None if folded.versions is None else folded.versions.where(mine),
        history_keys=None if folded.history_keys is None else folded.history_keys.where(mine),
        tables=[table.table],
        version=version,
    )
    report = TableApply(table=table.name, source=table.source.name)
    apply_staged(
        spark, tables, run, {table.table: Progress(-1, 0, table.signature)}, {table.table: report}
    )
    log(
        f"gold {table.name}: rebuilt from change-log version {version}, {report.rows} rows"
        + (f", {report.rejected} states rejected" if report.rejected else "")
    )
    return report
