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
from pyspark_jobs.gold.staging import PENDING_TABLE, STATE
from pyspark_jobs.gold.tables import TOMBSTONES_TABLE, gold_columns, gold_table_name
from pyspark_jobs.quality.definitions import CheckpointSpec

CHANGE_LOG = "silver.change_log"
REJECTS = "silver.change_log_rejects"
POSITION = ("source", "topic", "partition", "offset")


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

    Rule (by lineage): a bronze record (source, topic, partition, offset) is accounted for
    when a change in the log carries its position (``changes``; one record may yield
    several changes), a reject carries it (``rejected``), its value is null (``noops``:
    the Kafka tombstone after a delete; formats that reject a null value count under
    ``rejected`` first), it is a message its format defines as no change (``skipped``: a
    Debezium message event, ``op`` m, which silver neither logs nor rejects), or its key
    and value are byte-identical to a record that is in the log (``redelivered``: the same
    message under another offset, kept once). Anything else is ``unaccounted``.

    ``raw`` needs source, format, topic, partition, offset, key and value.
    """

    def positions(frame: DataFrame, flag: str) -> DataFrame:
        return frame.select(
            "source",
            *(F.col(f"lineage.{c}").alias(c) for c in POSITION[1:]),
            F.lit(True).alias(flag),
        ).distinct()

    # The one field the gate reads in a value: the Debezium op, inside the JSON
    # converter's {"schema", "payload"} envelope when there is one (as stg_cdc__debezium).
    debezium_op = F.when(
        F.get_json_object("value", "$.schema").isNotNull(),
        F.get_json_object("value", "$.payload.op"),
    ).otherwise(F.get_json_object("value", "$.op"))
    located = (
        raw.select(*POSITION, "format", "key", "value")
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
        .when((F.col("format") == "debezium") & (debezium_op == "m"), "skipped")
        .when(F.col("same_as_logged"), "redelivered")
        .otherwise("unaccounted")
        .alias("status"),
    )
    statuses = ["changes", "redelivered", "rejected", "noops", "skipped", "unaccounted"]
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


def gold_live_rows(table: DataFrame, table_name: str, soft_delete: bool) -> DataFrame:
    """The live rows of a gold table (soft-deleted rows are not live) as ``table``,
    ``record_key``, ``seq``, ``change_id``."""
    live = table.where(~F.coalesce(F.col("_deleted"), F.lit(False))) if soft_delete else table
    return live.select(
        F.lit(table_name).alias("table"),
        F.col("_record_key").alias("record_key"),
        F.col("_seq").alias("seq"),
        F.col("_change_id").alias("change_id"),
    )


def schema_differences(table: DataFrame, declared: list[tuple[str, str]]) -> str | None:
    """``COL: declared T, table has U; ...`` for columns whose type is not as config says."""
    actual = {f.name: f.dataType.simpleString() for f in table.schema.fields}
    differences = [
        f"{name}: declared {typ}, table has {actual.get(name, 'no such column')}"
        for name, typ in declared
        if actual.get(name, "").replace(" ", "") != typ.replace(" ", "")
    ]
    return "; ".join(differences) or None


def gold_reconciliation(
    tables: DataFrame, live: DataFrame, tombstones: DataFrame, staged: DataFrame
) -> DataFrame:
    """One row per gold table: its rows against what the table's own fold decided.

    ``tables``: (table, table_name, entity_kind, schema_differences) per gold table of
    config; ``live``: ``gold_live_rows`` of every table; ``tombstones``:
    ``lakehouse.gold_tombstones``; ``staged``: the net states of the last gold run
    (``lakehouse.gold_pending``, markers excluded).

    The gate asks nothing the fold did not decide, so it holds for every family
    (implicit vertices, ``insert-only``, cascades, Cassandra cell liveness):

    - ``deleted_keys_live``: live rows older than their key's tombstone (or the table's
      truncate): the fold deleted the key and nothing newer brought it back;
    - ``states_not_applied``: states of the last run that gold does not reflect (a live
      state without its row and change, a deleted state still live); states the run
      rejected (``rejected_states``, in ``lakehouse.gold_rejects``) are not expected.
    """
    named = F.broadcast(tables.select("table", "table_name"))
    tombs = tombstones.join(named, "table_name").select(
        "table", "record_key", F.col("seq").alias("tomb_seq")
    )
    keyed = tombs.where(F.col("record_key") != "{}")
    table_wide = tombs.where(F.col("record_key") == "{}").select(
        "table", F.col("tomb_seq").alias("table_tomb_seq")
    )
    checked = live.join(keyed, ["table", "record_key"], "left").join(table_wide, "table", "left")
    deleted_live = checked.where(
        (F.col("tomb_seq") > F.col("seq")) | (F.col("table_tomb_seq") > F.col("seq"))
    )
    states = staged.join(named, "table_name").select(
        "table",
        F.col("_record_key").alias("record_key"),
        F.col("_live").alias("state_live"),
        F.col("_seq").alias("state_seq"),
        F.col("_change_id").alias("state_change_id"),
        F.col("_reject_reason").isNotNull().alias("rejected"),
    )
    compared = states.join(
        live.select("table", "record_key", F.lit(True).alias("in_gold"), "seq", "change_id"),
        ["table", "record_key"],
        "left",
    )
    in_gold = F.coalesce(F.col("in_gold"), F.lit(False))
    reflected = F.when(
        F.col("state_live"),
        in_gold
        & (F.col("seq") == F.col("state_seq"))
        & (F.col("change_id") == F.col("state_change_id")),
    ).otherwise(~in_gold)
    per_table_states = compared.groupBy("table").agg(
        F.count_if(~F.col("rejected") & ~reflected).alias("states_not_applied"),
        F.count_if(F.col("rejected")).alias("rejected_states"),
    )
    per_table_live = live.groupBy("table").agg(F.count(F.lit(1)).alias("live_rows"))
    per_table_deleted = deleted_live.groupBy("table").agg(
        F.count(F.lit(1)).alias("deleted_keys_live")
    )
    counts = ["live_rows", "deleted_keys_live", "states_not_applied", "rejected_states"]
    return (
        tables.select("table", "entity_kind", "schema_differences")
        .join(per_table_live, "table", "left")
        .join(per_table_deleted, "table", "left")
        .join(per_table_states, "table", "left")
        .na.fill(0, counts)
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
    _require(spark, TOMBSTONES_TABLE, PENDING_TABLE)
    # Schemas are metadata: compared on the driver, one row per configured table.
    described = spark.createDataFrame(
        [
            (name, e.table, e.kind, schema_differences(spark.table(name), gold_columns(e)))
            for _, e, name in tables
        ],
        "table string, table_name string, entity_kind string, schema_differences string",
    )
    live = _union([gold_live_rows(spark.table(name), name, e.soft_delete) for _, e, name in tables])
    staged = spark.table(PENDING_TABLE).where(F.col("row_kind") == STATE)
    return gold_reconciliation(described, live, spark.table(TOMBSTONES_TABLE), staged)


_BUILDERS: dict[str, Callable[[SparkSession, LakehouseConfig, CheckpointSpec], DataFrame]] = {
    "bronze_records": _bronze_records,
    "bronze_reconciliation": _bronze_reconciliation,
    "change_log_records": _change_log_records,
    "silver_reconciliation": _silver_reconciliation,
    "gold_records": _gold_records,
    "gold_reconciliation": _gold_reconciliation,
}
