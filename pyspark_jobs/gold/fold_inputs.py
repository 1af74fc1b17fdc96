"""What one run's fold of a family reads, restricted to the keys it touches, materialized.

A fold joins its new changes with the gold rows, tombstones and (for the re-fold families
and SCD2 history) the change-log histories of the keys they touch. Inlined into one plan,
every gold table, the tombstones and the change log are read several times and the plan
grows to thousands of nodes: hundreds of Spark jobs for a handful of rows. So each input
is cut down to the touched keys and materialized once (``localCheckpoint``), and the fold
plans start from a few small in-memory relations.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.delta_log import holds_files
from pyspark_jobs.empty_frames import empty_frame
from pyspark_jobs.gold.change_feed import change_log_as_of
from pyspark_jobs.gold.folds import FoldFamily, FoldInputs
from pyspark_jobs.gold.folds.events import KEY, sorted_history
from pyspark_jobs.gold.folds.shared import TABLE_WIDE_KEY
from pyspark_jobs.gold.images import current_images
from pyspark_jobs.gold.table_specs import GoldTable, specs_frame
from pyspark_jobs.gold.tables import TOMBSTONES_TABLE
from pyspark_jobs.gold.typed_values import declared_types
from pyspark_jobs.materialize import materialized


def keys_of(changes: DataFrame) -> DataFrame:
    """``table_name``, ``_record_key`` of change-log rows, once each."""
    return changes.select("table_name", F.col("record_key").alias("_record_key")).distinct()


def of_keys(frame: DataFrame, keys: DataFrame, whole_tables: Collection[str] = ()) -> DataFrame:
    """The rows of ``frame`` (``table_name``, ``_record_key``) whose key is in ``keys``,
    plus every row of the tables named in ``whole_tables`` (those a truncate empties).

    An inner join with each wanted key once, not a semi join: Spark pushes a semi join
    below a union, and ``frame`` is often one (``current_images``: a scan per gold table),
    so each table got a join of its own, with two shuffles and their jobs. The inner join
    stays above the union: one shuffle of every table's rows (a warm cycle's changes to 24
    tables: the rows family's inputs 147 Spark jobs -> 54, docs/gold.md)."""
    wanted = keys
    if whole_tables:
        # One read of ``frame``: the whole tables' rows join as their own keys.
        wanted = keys.unionByName(frame.where(F.col("table_name").isin(*whole_tables)).select(*KEY))
    return frame.join(wanted.distinct(), KEY).select(*frame.columns)


def _log(spark: SparkSession, tables: Sequence[GoldTable], up_to: int) -> DataFrame:
    """The change log of ``tables`` as of ``up_to`` (the change log is partitioned by
    source: only the tables' sources are read)."""
    sources = sorted({t.source.name for t in tables})
    names = [t.table for t in tables]
    return change_log_as_of(spark, up_to).where(
        F.col("source").isin(*sources) & F.col("table_name").isin(*names)
    )


def gather(
    spark: SparkSession,
    family: FoldFamily,
    tables: Sequence[GoldTable],
    new: DataFrame,
    up_to: int,
    truncated: Collection[str] = (),
    related: Sequence[GoldTable] | None = None,
    whole_log: Collection[str] = (),
) -> FoldInputs:
    """The materialized inputs of ``family``'s fold over ``tables`` for the new changes
    ``new`` (change-log rows of any tables, already materialized); ``truncated``: the
    tables a new change truncates (all their keys are touched).

    Histories are gathered for the re-fold families (every affected key) and for the
    ``history: true`` tables of the others (their touched keys, for SCD2 versions).
    ``related``: the tables whose changes a history may derive events from (a family
    that ``derives_events``: every table of the family in the tables' sources); by
    default ``tables``. ``whole_log``: the tables every change-log row of which (up to
    ``up_to``) is in ``new`` (never applied yet, or rebuilt): when the histories read only
    such tables, they are made of the new rows, and the log is not read again.
    """
    specs = specs_frame(spark, tables)
    names = F.broadcast(specs.select("table_name"))
    changes = new.join(names, "table_name")
    keys = keys_of(changes)
    # The table-wide key of every table: its truncates and their tombstones.
    table_wide = specs.select("table_name", F.lit(TABLE_WIDE_KEY).alias("_record_key"))

    histories = None
    history_tables = [t for t in tables if t.entity.history]
    if family.refolds or history_tables:
        folded = list(tables) if family.refolds else history_tables
        # Events may derive from every related table's rows (cascades, implicit vertices).
        read = list(related or tables) if family.derives_events else folded
        read_specs = specs_frame(spark, read)
        read_new = new.join(F.broadcast(read_specs.select("table_name")), "table_name")
        if {t.table for t in read} <= set(whole_log):
            # Every row of these tables is new, so every key is affected and its whole
            # history is the new rows: a first run of the tables reads the log once.
            rows = read_new
        else:
            # Read once: the events refer to these rows several times.
            rows = materialized(family.history_rows(_log(spark, read, up_to), read_specs, read_new))
        events = family.events(rows, read_specs)
        histories = materialized(
            sorted_history(events, read_new.select("change_id")).join(
                F.broadcast(specs_frame(spark, folded).select("table_name")), "table_name"
            )
        )

    affected = keys if histories is None else keys.unionByName(histories.select(*KEY))
    tombstones = spark.table(TOMBSTONES_TABLE)
    if not holds_files(spark, TOMBSTONES_TABLE):  # a first run's: not scanned for nothing
        tombstones = empty_frame(spark, tombstones.schema)
    tombstones = tombstones.withColumnRenamed("record_key", "_record_key")
    return FoldInputs(
        changes=changes,
        current=materialized(of_keys(current_images(spark, tables), affected, truncated)),
        tombstones=materialized(
            of_keys(tombstones, affected.unionByName(table_wide), truncated)
            .join(names, "table_name")
            .withColumnRenamed("_record_key", "record_key")
        ),
        specs=specs,
        types=declared_types(t.entity for t in tables),
        histories=histories,
    )
