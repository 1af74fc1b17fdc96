"""Apply folded net states to a gold table with one Delta MERGE, and keep tombstones."""

from __future__ import annotations

from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.config import Entity
from pyspark_jobs.gold.tables import CAST_FAILURES_TABLE, TOMBSTONES_TABLE, gold_table_name
from pyspark_jobs.gold.typed_values import cast_failed, cast_value, key_columns


@dataclass(frozen=True)
class MergeMetrics:
    """What one MERGE did, from the Delta commit's operation metrics."""

    inserted: int
    updated: int
    deleted: int


def typed_rows(net: DataFrame, entity: Entity) -> DataFrame:
    """Net states as gold rows: typed key and value columns plus metadata and flags."""
    values = [
        cast_value(F.col("_image")[c], entity.columns[c]).alias(c) for c in entity.value_columns
    ]
    failures = [
        F.when(
            cast_failed(F.col("_image")[c], entity.columns[c]),
            F.struct(F.lit(c).alias("column_name"), F.col("_image")[c].alias("raw_value")),
        )
        for c in entity.value_columns
    ]
    cast_errors: Column = (
        F.filter(F.array(*failures), lambda x: x.isNotNull())
        if failures
        else F.array().cast("array<struct<column_name: string, raw_value: string>>")
    )
    return net.select(
        *key_columns(F.col("_record_key"), entity),
        *values,
        "_record_key",
        "_seq",
        "_change_id",
        "_source",
        "_event_ts",
        F.current_timestamp().alias("_updated_at"),
        "_cell_ts",
        "_live",
        "_tomb_seq",
        cast_errors.alias("_cast_errors"),
    )


def current_images(spark: SparkSession, entity: Entity) -> DataFrame:
    """Gold rows as the folds see them: ``_record_key``, ``_seq``, ``_image``, ``_cell_ts``
    and the metadata of the change they reflect."""
    table = spark.table(gold_table_name(entity))
    if entity.soft_delete:
        table = table.where(~F.coalesce(F.col("_deleted"), F.lit(False)))
    # Typed arrays, so a table without value columns still has a map<string, string>.
    image = F.map_from_arrays(
        F.array(*[F.lit(c) for c in entity.value_columns]).cast("array<string>"),
        F.array(*[F.col(c).cast("string") for c in entity.value_columns]).cast("array<string>"),
    )
    return table.select(
        "_record_key",
        "_seq",
        image.alias("_image"),
        "_cell_ts",
        "_change_id",
        "_source",
        "_event_ts",
    )


def merge_into_gold(spark: SparkSession, rows: DataFrame, entity: Entity) -> MergeMetrics:
    """One MERGE: live states upsert their row, deleted states delete it (or flag it)."""
    target = DeltaTable.forName(spark, gold_table_name(entity))
    data_columns = [*entity.columns, "_record_key", "_seq", "_change_id", "_source"]
    data_columns += ["_event_ts", "_updated_at", "_cell_ts"]
    assign: dict[str, str | Column] = {f"`{c}`": f"s.`{c}`" for c in data_columns}
    merge = target.alias("t").merge(rows.alias("s"), "t._record_key = s._record_key")
    if entity.soft_delete:
        live_assign: dict[str, str | Column] = {
            **assign,
            "_deleted": "false",
            "_deleted_at": "null",
        }
        gone_assign: dict[str, str | Column] = {
            "_deleted": "true",
            "_deleted_at": "s._event_ts",
            "_seq": "s._seq",
            "_change_id": "s._change_id",
            "_updated_at": "s._updated_at",
            "_cell_ts": "s._cell_ts",
        }
        merge = (
            merge.whenMatchedUpdate(condition="not s._live", set=gone_assign)
            .whenMatchedUpdate(condition="s._live", set=live_assign)
            .whenNotMatchedInsert(condition="s._live", values=live_assign)
        )
    else:
        merge = (
            merge.whenMatchedDelete(condition="not s._live")
            .whenMatchedUpdate(condition="s._live", set=assign)
            .whenNotMatchedInsert(condition="s._live", values=assign)
        )
    # execute() returns the row counts itself: no history() read of the Delta log.
    result = merge.execute().first()
    counts = result.asDict() if result is not None else {}

    def metric(name: str) -> int:
        return int(counts.get(name, 0) or 0)

    return MergeMetrics(
        inserted=metric("num_inserted_rows"),
        updated=metric("num_updated_rows"),
        deleted=metric("num_deleted_rows"),
    )


def merge_tombstones(spark: SparkSession, rows: DataFrame, entity: Entity) -> None:
    """Record the deletes (and row-deletion times) of ``rows`` as tombstones.

    ``rows`` may be a refold family's states: their tombstones are informational, the
    full history in silver is what keeps their deleted keys deleted.
    """
    tombs = rows.where(F.col("_tomb_seq").isNotNull()).select(
        F.lit(entity.table).alias("table_name"),
        F.col("_record_key").alias("record_key"),
        F.col("_tomb_seq").alias("seq"),
        F.col("_change_id").alias("change_id"),
        F.col("_cell_ts").alias("cell_ts"),
        F.col("_event_ts").alias("deleted_at"),
        F.current_timestamp().alias("recorded_at"),
    )
    (
        DeltaTable.forName(spark, TOMBSTONES_TABLE)
        .alias("t")
        .merge(tombs.alias("s"), "t.table_name = s.table_name and t.record_key = s.record_key")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )


def expire_tombstones(spark: SparkSession, retention_days: int) -> None:
    """Forget tombstones older than the retention: their keys may be re-created freely."""
    DeltaTable.forName(spark, TOMBSTONES_TABLE).delete(
        F.col("recorded_at")
        < F.expr(f"current_timestamp() - make_interval(0, 0, 0, {int(retention_days)})")
    )


def record_cast_failures(spark: SparkSession, rows: DataFrame, entity: Entity) -> None:
    """Append every value of ``rows`` that does not cast to its declared type, with its
    key and change, to ``lakehouse.gold_cast_failures`` (the row is kept with a null)."""
    declared = F.create_map(*[F.lit(x) for c, t in entity.columns.items() for x in (c, t)])
    rows.where(F.size("_cast_errors") > 0).select(
        F.lit(entity.table).alias("table_name"),
        F.col("_record_key").alias("record_key"),
        F.explode("_cast_errors").alias("e"),
        F.col("_change_id").alias("change_id"),
    ).select(
        "table_name",
        "record_key",
        "e.column_name",
        "e.raw_value",
        declared[F.col("e.column_name")].alias("declared_type"),
        "change_id",
        F.current_timestamp().alias("recorded_at"),
    ).write.format("delta").mode("append").saveAsTable(CAST_FAILURES_TABLE)
