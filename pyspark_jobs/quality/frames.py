"""The DataFrames the gates validate: lean projections of the tables, and reconciliations.

Reconciliations span tables, so GX cannot express them as one expectation; they are
computed here in Spark into one small row per source (or per gold table) and GX validates
those numbers. The transforms take DataFrames and return DataFrames; only
``build_frame`` reads tables.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.bronze.tables import QUARANTINE_TABLE, RAW_TABLE
from pyspark_jobs.config import Entity, LakehouseConfig, Source
from pyspark_jobs.gold.tables import gold_columns, gold_table_name
from pyspark_jobs.quality.definitions import CheckpointSpec

CHANGE_LOG = "silver.change_log"
REJECTS = "silver.change_log_rejects"
KEYED = "staging.int_change_log__keyed"
POSITION = ("source", "topic", "partition", "offset")
# Ops that carry the whole row: a key's last such change alone decides whether it is live.
FULL_ROW_OPS = ("upsert", "delete")


def _rate(part: Column, whole: Column) -> Column:
    return F.when(whole > 0, part / whole).otherwise(F.lit(0.0))


def _sources(spark: SparkSession, config: LakehouseConfig) -> DataFrame:
    """Every configured source, so a source with no records still gets its row."""
    return spark.createDataFrame([(s.name,) for s in config.sources], "source string")


def bronze_reconciliation(sources: DataFrame, raw: DataFrame, quarantine: DataFrame) -> DataFrame:
    """Per source: records read (landed + quarantined), quarantined, and the rate."""
    landed = raw.groupBy("source").agg(F.count(F.lit(1)).alias("landed"))
    quarantined = quarantine.groupBy("source").agg(F.count(F.lit(1)).alias("quarantined"))
    all_sources = sources.unionByName(raw.select("source")).unionByName(
        quarantine.select("source")
    ).distinct()
    counts = (
        all_sources.join(landed, "source", "left")
        .join(quarantined, "source", "left")
        .na.fill(0, ["landed", "quarantined"])
    )
    return counts.select(
        "source",
        (F.col("landed") + F.col("quarantined")).alias("read"),
        "quarantined",
        _rate(F.col("quarantined"), F.col("landed") + F.col("quarantined")).alias(
            "quarantine_rate"
        ),
    )


def silver_reconciliation(
    sources: DataFrame, raw: DataFrame, keyed: DataFrame, log: DataFrame, rejects: DataFrame
) -> DataFrame:
    """Per source: where each bronze record went.

    Rule: a bronze record (source, topic, partition, offset) is accounted for when
    ``int_change_log__keyed`` (the model that feeds both silver tables) classifies it and
    silver holds it accordingly: a change whose lineage is in the log (``changes``), a
    change whose change_id is in the log under an earlier delivery (``redelivered``), a
    reject whose lineage is in the rejects (``rejected``), or a no-op such as the Kafka
    tombstone after a delete (``noops``). Anything else is ``unaccounted``.
    """
    logged_at = log.select(
        "source", *(F.col(f"lineage.{c}").alias(c) for c in POSITION[1:]), F.lit(True).alias("in_log")
    )
    logged_ids = log.select("change_id", F.lit(True).alias("id_in_log"))
    rejected_at = rejects.select(
        "source", *(F.col(f"lineage.{c}").alias(c) for c in POSITION[1:]), F.lit(True).alias("in_rejects")
    ).distinct()
    classified = (
        raw.select(*POSITION)
        .join(
            keyed.select(
                "source",
                *(F.col(f"lineage.{c}").alias(c) for c in POSITION[1:]),
                "change_id",
                "reject_reason",
                "is_noop",
                F.lit(True).alias("staged"),
            ),
            list(POSITION),
            "left",
        )
        .join(logged_at, list(POSITION), "left")
        .join(rejected_at, list(POSITION), "left")
        .join(logged_ids.distinct(), "change_id", "left")
        .select(
            "source",
            F.when(F.col("staged").isNull(), "unaccounted")
            .when(F.col("reject_reason").isNotNull(), F.when(F.col("in_rejects"), "rejected").otherwise("unaccounted"))
            .when(F.col("is_noop"), "noops")
            .when(F.col("in_log"), "changes")
            .when(F.col("id_in_log"), "redelivered")
            .otherwise("unaccounted")
            .alias("status"),
        )
    )
    statuses = ["changes", "redelivered", "rejected", "noops", "unaccounted"]
    counts = classified.groupBy("source").agg(
        F.count(F.lit(1)).alias("bronze_records"),
        *(F.count_if(F.col("status") == s).alias(s) for s in statuses),
    )
    return (
        sources.join(counts, "source", "outer")
        .na.fill(0, ["bronze_records", *statuses])
        .withColumn("reject_rate", _rate(F.col("rejected"), F.col("bronze_records")))
    )


def gold_keys(table: DataFrame, table_name: str, key: tuple[str, ...]) -> DataFrame:
    """A gold table's rows reduced to what the key checks need, in a shape every table shares.

    ``key_values`` is the typed key as JSON (so uniqueness is checked on the declared
    types, not only on the canonical ``_record_key`` text); ``null_key_columns`` names
    the key columns a row leaves empty, or is null.
    """
    nulls = [F.when(F.col(k).isNull(), F.lit(k)) for k in key]
    return table.select(
        F.lit(table_name).alias("table"),
        "_record_key",
        F.to_json(F.struct(*key)).alias("key_values"),
        F.when(F.concat_ws(", ", *nulls) != "", F.concat(F.lit(f"{table_name}: "), F.concat_ws(", ", *nulls)))
        .alias("null_key_columns"),
    )


def gold_reconciliation(
    table: DataFrame,
    table_name: str,
    declared: list[tuple[str, str]],
    log: DataFrame,
    soft_delete: bool,
) -> DataFrame:
    """One row for a gold table: its schema against config and its keys against the log.

    ``declared`` is the expected (column, type) list; ``log`` the table's change-log rows.
    A key is expected live when its last change (highest seq) is not a delete.
    ``expected_keys_missing`` counts such keys without a live row. It must be 0 only when
    every change of the table is a full row (``upsert``/``delete``): a patch may create a
    row from one cell or leave a row with no cells, so for tables with partial changes
    ``missing_keys_allowed`` is the number of expected keys (the check holds for all
    families: live rows are never more than expected, see ``live_keys_not_in_log``).
    """
    actual = {f.name: f.dataType.simpleString() for f in table.schema.fields}
    differences = [
        f"{name}: declared {typ}, table has {actual.get(name, 'no such column')}"
        for name, typ in declared
        if actual.get(name, "").replace(" ", "") != typ.replace(" ", "")
    ]
    live = table.where(~F.coalesce(F.col("_deleted"), F.lit(False))) if soft_delete else table
    live_keys = live.select(F.col("_record_key").alias("record_key")).distinct()
    last = log.groupBy("record_key").agg(F.max_by("op", "seq").alias("last_op"))
    alive_in_log = last.where(F.col("last_op") != "delete")
    deleted_live = live_keys.join(last.where(F.col("last_op") == "delete"), "record_key", "left_semi")
    metrics = [
        live_keys.agg(F.count(F.lit(1)).alias("live_rows")),
        alive_in_log.agg(F.count(F.lit(1)).alias("expected_live_keys")),
        deleted_live.agg(F.count(F.lit(1)).alias("deleted_keys_live")),
        live_keys.join(last, "record_key", "left_anti").agg(F.count(F.lit(1)).alias("live_keys_not_in_log")),
        alive_in_log.join(live_keys, "record_key", "left_anti").agg(
            F.count(F.lit(1)).alias("expected_keys_missing")
        ),
        log.agg(F.count_if(~F.col("op").isin(*FULL_ROW_OPS)).alias("partial_changes")),
    ]
    row = metrics[0]
    for metric in metrics[1:]:
        row = row.crossJoin(metric)
    return row.select(
        F.lit(table_name).alias("table"),
        "*",
        F.when(F.col("partial_changes") == 0, F.lit(0))
        .otherwise(F.col("expected_live_keys"))
        .cast("bigint")
        .alias("missing_keys_allowed"),
        F.lit("; ".join(differences) if differences else None).cast("string").alias("schema_differences"),
    )


def _union(frames: list[DataFrame]) -> DataFrame:
    return functools.reduce(DataFrame.unionByName, frames)


def build_frame(spark: SparkSession, config: LakehouseConfig, spec: CheckpointSpec) -> DataFrame:
    """Read the tables a checkpoint guards and build its frame (whole tables, lean columns)."""
    return _BUILDERS[spec.frame](spark, config, spec)


def _require(spark: SparkSession, *tables: str) -> None:
    missing = [t for t in tables if not spark.catalog.tableExists(t)]
    if missing:
        raise MissingTable(f"{', '.join(missing)} does not exist yet: build the layer first")


class MissingTable(RuntimeError):
    """The gate's table is not there: the layer has not been built."""


def _bronze_records(spark: SparkSession, config: LakehouseConfig, spec: CheckpointSpec) -> DataFrame:
    _require(spark, RAW_TABLE)
    return spark.table(RAW_TABLE).select(*POSITION, "format")


def _bronze_reconciliation(spark: SparkSession, config: LakehouseConfig, spec: CheckpointSpec) -> DataFrame:
    _require(spark, RAW_TABLE, QUARANTINE_TABLE)
    return bronze_reconciliation(_sources(spark, config), spark.table(RAW_TABLE), spark.table(QUARANTINE_TABLE))


def _change_log_records(spark: SparkSession, config: LakehouseConfig, spec: CheckpointSpec) -> DataFrame:
    _require(spark, CHANGE_LOG)
    return spark.table(CHANGE_LOG).select("change_id", "op", "format", "entity_kind", "record_key", "seq")


def _silver_reconciliation(spark: SparkSession, config: LakehouseConfig, spec: CheckpointSpec) -> DataFrame:
    _require(spark, RAW_TABLE, KEYED, CHANGE_LOG, REJECTS)
    return silver_reconciliation(
        _sources(spark, config),
        spark.table(RAW_TABLE),
        spark.table(KEYED),
        spark.table(CHANGE_LOG),
        spark.table(REJECTS),
    )


def _gold_tables(spark: SparkSession, config: LakehouseConfig) -> list[tuple[Source, Entity, str]]:
    tables = [(s, e, gold_table_name(e)) for s, e in config.tables()]
    _require(spark, *(name for _, _, name in tables))
    return tables


def _gold_records(spark: SparkSession, config: LakehouseConfig, spec: CheckpointSpec) -> DataFrame:
    return _union(
        [gold_keys(spark.table(name), name, e.key) for _, e, name in _gold_tables(spark, config)]
    )


def _gold_reconciliation(spark: SparkSession, config: LakehouseConfig, spec: CheckpointSpec) -> DataFrame:
    tables = _gold_tables(spark, config)
    _require(spark, CHANGE_LOG)
    log = spark.table(CHANGE_LOG)
    return _union(
        [
            gold_reconciliation(
                spark.table(name),
                name,
                gold_columns(e),
                log.where((F.col("table_name") == e.table) & (F.col("source") == s.name)),
                e.soft_delete,
            )
            for s, e, name in tables
        ]
    )


_BUILDERS: dict[str, Callable[[SparkSession, LakehouseConfig, CheckpointSpec], DataFrame]] = {
    "bronze_records": _bronze_records,
    "bronze_reconciliation": _bronze_reconciliation,
    "change_log_records": _change_log_records,
    "silver_reconciliation": _silver_reconciliation,
    "gold_records": _gold_records,
    "gold_reconciliation": _gold_reconciliation,
}
