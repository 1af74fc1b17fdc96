"""Gold tables and the small state tables gold keeps beside them.

A gold table holds the entity's declared columns, typed, plus metadata columns:
``_record_key`` (canonical key, what MERGE joins on), ``_seq`` and ``_change_id`` of the
last applied change, ``_source``, ``_event_ts``, ``_updated_at``, ``_cell_ts`` (per-column
write times, for formats resolved per cell) and, for soft-delete tables, ``_deleted`` and
``_deleted_at``. Change data feed is on so consumers can follow the table.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from pyspark_jobs.catalog import table_exists
from pyspark_jobs.config import Entity
from pyspark_jobs.storage import clear_killed_creation, create_table_if_missing

GOLD_SCHEMA = "gold"
TOMBSTONES_TABLE = "lakehouse.gold_tombstones"
PROGRESS_TABLE = "lakehouse.gold_progress"
REJECTS_TABLE = "lakehouse.gold_rejects"

SEQ_TYPE = "array<bigint>"
CELL_TS_TYPE = "map<string, bigint>"
METADATA_COLUMNS: tuple[tuple[str, str], ...] = (
    ("_record_key", "string"),
    ("_seq", SEQ_TYPE),
    ("_change_id", "string"),
    ("_source", "string"),
    ("_event_ts", "timestamp"),
    ("_updated_at", "timestamp"),
    ("_cell_ts", CELL_TS_TYPE),
)
SOFT_DELETE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("_deleted", "boolean"),
    ("_deleted_at", "timestamp"),
)


def spark_type(declared: str) -> str:
    """The Spark SQL type a declared column is stored as (``json`` is kept as text)."""
    return "string" if declared == "json" else declared


def gold_table_name(entity: Entity) -> str:
    return f"{GOLD_SCHEMA}.{entity.table}"


def gold_columns(entity: Entity) -> list[tuple[str, str]]:
    """All columns of an entity's gold table, in table order."""
    declared = [(name, spark_type(typ)) for name, typ in entity.columns.items()]
    extra = list(SOFT_DELETE_COLUMNS) if entity.soft_delete else []
    return declared + list(METADATA_COLUMNS) + extra


def quote(identifier: str) -> str:
    # Identifiers come from validated config (see config._IDENTIFIER), never from messages.
    return f"`{identifier}`"


def create_gold_table(spark: SparkSession, entity: Entity, replace: bool = False) -> None:
    """Create the gold table with the declared layout (``replace``: an existing table is
    replaced by an empty one, as a new version of the same Delta table)."""
    spark.sql(f"create database if not exists {GOLD_SCHEMA}")
    cols = ",\n    ".join(f"{quote(c)} {t}" for c, t in gold_columns(entity))
    verb = "create or replace table" if replace else "create table"
    clear_killed_creation(spark, gold_table_name(entity))
    spark.sql(
        f"{verb} {gold_table_name(entity)} (\n    {cols}\n) using delta "
        "tblproperties (delta.enableChangeDataFeed = true, delta.enableDeletionVectors = true)"
    )


def ensure_gold_table(spark: SparkSession, entity: Entity) -> None:
    """Create the gold table, or add columns newly declared in config to it."""
    name = gold_table_name(entity)
    wanted = gold_columns(entity)
    if not table_exists(spark, name):
        create_gold_table(spark, entity)
        return
    existing = {f.name.lower() for f in spark.table(name).schema.fields}
    missing = [(c, t) for c, t in wanted if c.lower() not in existing]
    if missing:
        added = ", ".join(f"{quote(c)} {t}" for c, t in missing)
        spark.sql(f"alter table {name} add columns ({added})")


def ensure_state_tables(spark: SparkSession) -> None:
    """Create the tombstone, rejects and progress tables if needed."""
    spark.sql("create database if not exists lakehouse")
    create_table_if_missing(
        spark,
        TOMBSTONES_TABLE,
        f"""
        create table if not exists {TOMBSTONES_TABLE} (
            table_name string not null,
            record_key string not null,
            seq {SEQ_TYPE} not null comment 'seq of the delete',
            change_id string,
            cell_ts {CELL_TS_TYPE} comment 'per-cell write times the deleted key still needs',
            deleted_at timestamp comment 'event time of the delete',
            recorded_at timestamp not null
        ) using delta
        comment 'Deleted keys, so a late older change cannot resurrect them'
        """,
    )
    create_table_if_missing(
        spark,
        REJECTS_TABLE,
        f"""
        create table if not exists {REJECTS_TABLE} (
            table_name string not null comment 'gold table (or <table>_history)',
            record_key string,
            reason string not null comment 'the key or value that does not fit, quoted',
            change_id string comment 'the change that decided the state: its lineage is in silver',
            seq {SEQ_TYPE},
            source string,
            event_ts timestamp,
            silver_version bigint not null comment 'change_log version of the run',
            recorded_at timestamp not null
        ) using delta
        comment 'Net states and history versions gold did not merge, with the reason'
        """,
    )
    create_table_if_missing(
        spark,
        PROGRESS_TABLE,
        f"""
        create table if not exists {PROGRESS_TABLE} (
            table_name string not null,
            silver_version bigint not null comment 'last change_log version applied',
            applied_at timestamp not null,
            row_count bigint comment 'rows in the table after the run (from MERGE metrics)',
            signature string comment 'layout (columns, options) the table was checked for'
        ) using delta
        """,
    )
    existing = spark.table(PROGRESS_TABLE).columns
    added = [c for c in ("row_count bigint", "signature string") if c.split()[0] not in existing]
    if added:
        # A lake from before these columns: their old rows read as unknown (null).
        spark.sql(f"alter table {PROGRESS_TABLE} add columns ({', '.join(added)})")
