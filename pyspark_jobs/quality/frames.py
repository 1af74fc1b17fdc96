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
    all_sources = (
        sources.unionByName(raw.select("source"))
        .unionByName(quarantine.select("source"))
        .distinct()
    )
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
    sources: DataFrame, raw: DataFrame, log: DataFrame, rejects: DataFrame
) -> DataFrame:
    """Per source: where each bronze record went.

    Rule (by lineage, no re-parsing): a bronze record (source, topic, partition, offset)
    is accounted for when a change in the log carries its position (``changes``; one
    record may yield several changes), a reject carries it (``rejected``), its value is
    null (``noops``: the Kafka tombstone after a delete; formats that reject a null value
    count under ``rejected`` first), or its key and value are byte-identical to a record
    that is in the log (``redelivered``: the same message under another offset, kept once).
    Anything else is ``unaccounted``.
    """

    def positions(frame: DataFrame, flag: str) -> DataFrame:
        return frame.select(
            "source",
            *(F.col(f"lineage.{c}").alias(c) for c in POSITION[1:]),
            F.lit(True).alias(flag),
        ).distinct()

    located = (
        raw.select(*POSITION, "key", "value")
        .join(positions(log, "in_log"), list(POSITION), "left")
        .join(positions(rejects, "in_rejects"), list(POSITION), "left")
    )
    logged_messages = (
        located.where(F.col("in_log"))
        .select(
            F.col("source").alias("l_source"),
            F.col("key").alias("l_key"),
            F.col("value").alias("l_value"),
        )
        .distinct()
        .withColumn("same_as_logged", F.lit(True))
    )
    classified = located.join(
        logged_messages,
        (F.col("source") == F.col("l_source"))
        & F.col("key").eqNullSafe(F.col("l_key"))
        & (F.col("value") == F.col("l_value")),
        "left",
    ).select(
        "source",
        F.when(F.col("in_log"), "changes")
        .when(F.col("in_rejects"), "rejected")
        .when(F.col("value").isNull(), "noops")
        .when(F.col("same_as_logged"), "redelivered")
        .otherwise("unaccounted")
        .alias("status"),
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
        F.when(
            F.concat_ws(", ", *nulls) != "",
            F.concat(F.lit(f"{table_name}: "), F.concat_ws(", ", *nulls)),
        ).alias("null_key_columns"),
    )


def gold_live_keys(table: DataFrame, table_name: str, soft_delete: bool) -> DataFrame:
    """The keys a gold table holds as live rows (soft-deleted rows are not live)."""
    live = table.where(~F.coalesce(F.col("_deleted"), F.lit(False))) if soft_delete else table
    return live.select(F.lit(table_name).alias("table"), F.col("_record_key").alias("record_key"))


def schema_differences(table: DataFrame, declared: list[tuple[str, str]]) -> str | None:
    """``COL: declared T, table has U; ...`` for columns whose type is not as config says."""
    actual = {f.name: f.dataType.simpleString() for f in table.schema.fields}
    differences = [
        f"{name}: declared {typ}, table has {actual.get(name, 'no such column')}"
        for name, typ in declared
        if actual.get(name, "").replace(" ", "") != typ.replace(" ", "")
    ]
    return "; ".join(differences) or None


def gold_reconciliation(tables: DataFrame, live: DataFrame, log: DataFrame) -> DataFrame:
    """One row per gold table: its keys against the change log, in one pass over each.

    ``tables``: (table, source, table_name, schema_differences) per gold table of config;
    ``live``: (table, record_key) of live gold rows; ``log``: the change log.
    A key is expected live when its last change (highest seq) is not a delete.
    ``expected_keys_missing`` counts such keys without a live row. It must be 0 only when
    every change of the table is a full row (``upsert``/``delete``): a patch may create a
    row from one cell or leave a row with no cells, so for tables with partial changes
    ``missing_keys_allowed`` is the number of expected keys. The other checks hold for
    every fold family: no live row for a key whose last change is a delete, and no live
    row for a key the log never saw (except vertex tables, whose vertices an edge may
    create: ``unlogged_keys_allowed``).
    """
    last = (
        log.join(
            F.broadcast(tables.select("source", "table_name", "table")), ["source", "table_name"]
        )
        .groupBy("table", "record_key")
        .agg(
            F.max_by("op", "seq").alias("last_op"),
            F.max((~F.col("op").isin(*FULL_ROW_OPS)).cast("int")).alias("partial"),
        )
    )
    keys = last.join(live.withColumn("live", F.lit(True)), ["table", "record_key"], "full")
    is_live = F.coalesce(F.col("live"), F.lit(False))
    expected = F.col("last_op").isNotNull() & (F.col("last_op") != "delete")
    per_table = keys.groupBy("table").agg(
        F.count_if(is_live).alias("live_rows"),
        F.count_if(expected).alias("expected_live_keys"),
        F.count_if(is_live & (F.col("last_op") == "delete")).alias("deleted_keys_live"),
        F.count_if(is_live & F.col("last_op").isNull()).alias("live_keys_not_in_log"),
        F.count_if(expected & ~is_live).alias("expected_keys_missing"),
        F.coalesce(F.sum("partial"), F.lit(0)).alias("partial_changes"),
    )
    counts = [
        "live_rows",
        "expected_live_keys",
        "deleted_keys_live",
        "live_keys_not_in_log",
        "expected_keys_missing",
        "partial_changes",
    ]
    return (
        tables.select("table", "entity_kind", "schema_differences")
        .join(per_table, "table", "left")
        .na.fill(0, counts)
        .withColumn(
            # A TigerGraph edge creates its endpoint vertices (gold/graph_cascades.py), so a
            # vertex table may hold keys its own change log never named.
            "unlogged_keys_allowed",
            F.when(F.col("entity_kind") == "vertex", F.col("live_rows"))
            .otherwise(F.lit(0))
            .cast("bigint"),
        )
        .withColumn(
            "missing_keys_allowed",
            F.when(F.col("partial_changes") == 0, F.lit(0))
            .otherwise(F.col("expected_live_keys"))
            .cast("bigint"),
        )
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


def _bronze_records(
    spark: SparkSession, config: LakehouseConfig, spec: CheckpointSpec
) -> DataFrame:
    _require(spark, RAW_TABLE)
    return spark.table(RAW_TABLE).select(*POSITION, "format")


def _bronze_reconciliation(
    spark: SparkSession, config: LakehouseConfig, spec: CheckpointSpec
) -> DataFrame:
    _require(spark, RAW_TABLE, QUARANTINE_TABLE)
    return bronze_reconciliation(
        _sources(spark, config), spark.table(RAW_TABLE), spark.table(QUARANTINE_TABLE)
    )


def _change_log_records(
    spark: SparkSession, config: LakehouseConfig, spec: CheckpointSpec
) -> DataFrame:
    _require(spark, CHANGE_LOG)
    return spark.table(CHANGE_LOG).select(
        "change_id", "op", "format", "entity_kind", "record_key", "seq"
    )


def _silver_reconciliation(
    spark: SparkSession, config: LakehouseConfig, spec: CheckpointSpec
) -> DataFrame:
    _require(spark, RAW_TABLE, CHANGE_LOG, REJECTS)
    return silver_reconciliation(
        _sources(spark, config),
        spark.table(RAW_TABLE),
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


def _gold_reconciliation(
    spark: SparkSession, config: LakehouseConfig, spec: CheckpointSpec
) -> DataFrame:
    tables = _gold_tables(spark, config)
    _require(spark, CHANGE_LOG)
    # Schemas are metadata: compared on the driver, one row per configured table.
    described = spark.createDataFrame(
        [
            (name, s.name, e.table, e.kind, schema_differences(spark.table(name), gold_columns(e)))
            for s, e, name in tables
        ],
        "table string, source string, table_name string, entity_kind string, "
        "schema_differences string",
    )
    live = _union([gold_live_keys(spark.table(name), name, e.soft_delete) for _, e, name in tables])
    return gold_reconciliation(described, live, spark.table(CHANGE_LOG))


_BUILDERS: dict[str, Callable[[SparkSession, LakehouseConfig, CheckpointSpec], DataFrame]] = {
    "bronze_records": _bronze_records,
    "bronze_reconciliation": _bronze_reconciliation,
    "change_log_records": _change_log_records,
    "silver_reconciliation": _silver_reconciliation,
    "gold_records": _gold_records,
    "gold_reconciliation": _gold_reconciliation,
}
