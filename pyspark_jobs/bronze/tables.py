"""The bronze tables: every record as received, and what could not be read."""

from __future__ import annotations

from pyspark.sql import SparkSession

from pyspark_jobs.storage import create_table_if_missing

RAW_TABLE = "bronze.cdc_raw"
QUARANTINE_TABLE = "bronze.cdc_quarantine"

# Columns both readers produce before the ingest job adds source, format and batch lineage.
RECORD_COLUMNS = (
    "topic",
    "partition",
    "offset",
    "kafka_timestamp",
    "key",
    "value",
    "landing_file",
)

_RAW_DDL = f"""
create table if not exists {RAW_TABLE} (
    source string not null comment 'source name from config/sources.yml',
    format string not null comment 'CDC format of the source, for silver',
    topic string not null,
    `partition` int not null,
    `offset` bigint not null,
    kafka_timestamp timestamp comment 'Kafka record timestamp',
    key string comment 'record key exactly as received',
    value string comment 'record value exactly as received; null for a Kafka tombstone',
    landing_file string comment 'landing file the record came from; null for Kafka',
    ingested_at timestamp not null,
    batch_id bigint not null comment 'streaming micro-batch id of the source',
    ingest_date date not null
) using delta
partitioned by (source, ingest_date)
tblproperties (delta.enableChangeDataFeed = true, delta.enableRowTracking = true)
"""

_QUARANTINE_DDL = f"""
create table if not exists {QUARANTINE_TABLE} (
    source string not null,
    format string not null,
    reason string not null comment 'why the record could not be read',
    raw string comment 'the line (landing files) or value (Kafka) as received',
    topic string,
    `partition` int,
    `offset` bigint,
    landing_file string,
    ingested_at timestamp not null,
    batch_id bigint not null,
    ingest_date date not null
) using delta
partitioned by (source, ingest_date)
"""


def ensure_bronze_tables(spark: SparkSession) -> None:
    """Create the bronze schema and tables if they do not exist yet."""
    spark.sql("create database if not exists bronze")
    create_table_if_missing(spark, RAW_TABLE, _RAW_DDL)
    create_table_if_missing(spark, QUARANTINE_TABLE, _QUARANTINE_DDL)
