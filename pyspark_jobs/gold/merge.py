"""The writes of a gold run, each safe to repeat with the same staged states.

- ``record_rejects``: one MERGE of every diverted state, keyed by table, key and change
  (an append while the table holds no rows);
- ``merge_tombstones``: one MERGE of the deletes of every table (an append while the
  table holds no rows);
- ``merge_into_gold``: one MERGE per gold table; a row already equal to its state is
  not rewritten, so a repeat changes nothing (``insert_into_empty_gold``: the same
  write to a table without rows, as an append).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.config import Entity
from pyspark_jobs.delta_log import holds_files
from pyspark_jobs.gold.tables import REJECTS_TABLE, TOMBSTONES_TABLE, gold_table_name, quote
from pyspark_jobs.gold.typed_values import cast_value, key_columns

MAP_COLUMNS = ("_cell_ts", "cell_ts")


@dataclass(frozen=True)
class MergeMetrics:
    """What one MERGE did, from the Delta commit's operation metrics."""

    inserted: int = 0
    updated: int = 0
    deleted: int = 0


def typed_rows(states: DataFrame, entity: Entity) -> DataFrame:
    """Net states of one table as its gold rows: typed key and value columns, metadata."""
    values = [
        cast_value(F.col("_image")[c], entity.columns[c], exact=True).alias(c)
        for c in entity.value_columns
    ]
    return states.select(
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
    )


def _comparable(side: str, column: str) -> str:
    # Maps (the per-cell write times) are not comparable in Spark; their sorted entries are.
    if column in MAP_COLUMNS:
        return f"array_sort(map_entries({side}.{quote(column)}))"
    return f"{side}.{quote(column)}"


def differs(columns: list[str]) -> str:
    """SQL: the target row ``t`` differs from the source ``s`` in one of ``columns``
    (null-safe)."""
    return " or ".join(f"not ({_comparable('t', c)} <=> {_comparable('s', c)})" for c in columns)


def merge_metrics(result: DataFrame) -> MergeMetrics:
    """The row counts a Delta MERGE returns (no read of the table's history)."""
    row = result.first()
    counts = row.asDict() if row is not None else {}

    def metric(name: str) -> int:
        return int(counts.get(name, 0) or 0)

    return MergeMetrics(
        inserted=metric("num_inserted_rows"),
        updated=metric("num_updated_rows"),
        deleted=metric("num_deleted_rows"),
    )


def _assignments(entity: Entity) -> tuple[list[str], dict[str, str | Column]]:
    """The compared columns, and the live row a state ``s`` writes (column -> SQL)."""
    compared = [*entity.columns, "_seq", "_change_id", "_source", "_event_ts", "_cell_ts"]
    data_columns = [*entity.columns, "_record_key", *compared[len(entity.columns) :]]
    assign: dict[str, str | Column] = {quote(c): f"s.{quote(c)}" for c in data_columns}
    assign["_updated_at"] = "s._updated_at"
    if entity.soft_delete:
        assign = {**assign, "_deleted": "false", "_deleted_at": "null"}
    return compared, assign


def merge_into_gold(spark: SparkSession, rows: DataFrame, entity: Entity) -> MergeMetrics:
    """One MERGE: live states upsert their row, deleted states delete it (or flag it).

    A row equal to its state (a repeat of the same run) is left alone.
    """
    target = DeltaTable.forName(spark, gold_table_name(entity))
    compared, live_assign = _assignments(entity)
    merge = target.alias("t").merge(rows.alias("s"), "t._record_key = s._record_key")
    if entity.soft_delete:
        gone_assign: dict[str, str | Column] = {
            "_deleted": "true",
            "_deleted_at": "s._event_ts",
            "_seq": "s._seq",
            "_change_id": "s._change_id",
            "_updated_at": "s._updated_at",
            "_cell_ts": "s._cell_ts",
        }
        already_gone = "t._deleted and t._change_id <=> s._change_id"
        merge = (
            merge.whenMatchedUpdate(
                condition=f"not s._live and not ({already_gone})", set=gone_assign
            )
            .whenMatchedUpdate(
                condition=f"s._live and (t._deleted or {differs(compared)})", set=live_assign
            )
            .whenNotMatchedInsert(condition="s._live", values=live_assign)
        )
    else:
        merge = (
            merge.whenMatchedDelete(condition="not s._live")
            .whenMatchedUpdate(condition=f"s._live and ({differs(compared)})", set=live_assign)
            .whenNotMatchedInsert(condition="s._live", values=live_assign)
        )
    return merge_metrics(merge.execute())


def insert_into_empty_gold(spark: SparkSession, rows: DataFrame, entity: Entity) -> None:
    """What ``merge_into_gold`` does to a table without rows, as one append: the live
    states' rows, as its insert clause writes them (a column it does not assign is null).

    Only for a table whose log says it holds no file: once the append commits, the table
    holds files, so a repeat of the same run MERGEs and changes nothing.
    """
    _, assign = _assignments(entity)
    append_inserts(spark, gold_table_name(entity), rows.where("_live"), assign)


def append_inserts(
    spark: SparkSession, name: str, source: DataFrame, values: Mapping[str, str | Column]
) -> None:
    """Append to ``name`` the row a MERGE's insert clause with ``values`` (quoted column
    -> SQL over the source row ``s``) writes for each row of ``source``: every column of
    the table cast to its type, null where the clause does not assign it."""
    assigned = {column.strip("`").lower(): value for column, value in values.items()}

    def value(sql: str | Column) -> Column:
        return sql if isinstance(sql, Column) else F.expr(sql)

    source.alias("s").select(
        *[
            value(assigned.get(f.name.lower(), "null")).cast(f.dataType).alias(f.name)
            for f in spark.table(name).schema.fields
        ]
    ).writeTo(name).append()


def appended_to_empty(spark: SparkSession, name: str, rows: DataFrame) -> bool:
    """Whether ``rows`` were appended to ``name`` because its log says it holds no file:
    what a MERGE that inserts every unmatched row does there, in one Spark job instead of
    seven. Once the append commits the table holds files, so a repeat of the same run
    MERGEs and changes nothing."""
    if holds_files(spark, name):
        return False
    append_inserts(spark, name, rows, {c: f"s.{c}" for c in rows.columns})
    return True


def merge_tombstones(spark: SparkSession, states: DataFrame) -> None:
    """Record the deletes (and row-deletion times) among ``states`` of every table as
    tombstones.

    For the re-fold families the tombstones are informational (the full history in silver
    keeps their deleted keys deleted); the gold gate reads them all.
    """
    tombs = states.where(F.col("_tomb_seq").isNotNull()).select(
        "table_name",
        F.col("_record_key").alias("record_key"),
        F.col("_tomb_seq").alias("seq"),
        F.col("_change_id").alias("change_id"),
        F.col("_cell_ts").alias("cell_ts"),
        F.col("_event_ts").alias("deleted_at"),
        F.current_timestamp().alias("recorded_at"),
    )
    if appended_to_empty(spark, TOMBSTONES_TABLE, tombs):
        return
    changed = differs(["seq", "change_id", "cell_ts"])
    (
        DeltaTable.forName(spark, TOMBSTONES_TABLE)
        .alias("t")
        .merge(tombs.alias("s"), "t.table_name = s.table_name and t.record_key = s.record_key")
        .whenMatchedUpdateAll(condition=changed)
        .whenNotMatchedInsertAll()
        .execute()
    )


def expire_tombstones(spark: SparkSession, retention_days: int) -> None:
    """Forget tombstones older than the retention: their keys may be re-created freely."""
    DeltaTable.forName(spark, TOMBSTONES_TABLE).delete(
        F.col("recorded_at")
        < F.expr(f"current_timestamp() - make_interval(0, 0, 0, {int(retention_days)})")
    )


def record_rejects(spark: SparkSession, rejects: DataFrame, version: int) -> None:
    """Add diverted rows (``table_name``, ``record_key``, ``reason``, ``change_id``,
    ``seq``, ``source``, ``event_ts``) to ``lakehouse.gold_rejects``.

    Keyed by table, key and change: a repeat of the same run, or a later run that rejects
    the same state or history version again, adds nothing.
    """
    rows = rejects.select(
        "table_name",
        "record_key",
        "reason",
        "change_id",
        "seq",
        "source",
        "event_ts",
        F.lit(version).cast("bigint").alias("silver_version"),
        F.current_timestamp().alias("recorded_at"),
    )
    if appended_to_empty(spark, REJECTS_TABLE, rows):
        return
    (
        DeltaTable.forName(spark, REJECTS_TABLE)
        .alias("t")
        .merge(
            rows.alias("s"),
            "t.table_name = s.table_name and t.record_key <=> s.record_key "
            "and t.change_id <=> s.change_id",
        )
        .whenNotMatchedInsertAll()
        .execute()
    )
