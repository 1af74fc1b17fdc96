"""Publish the declared entities of config/sources.yml as ``lakehouse.entities`` for dbt.

Silver needs the declared key columns (a GoldenGate key is one ``_``-joined string that
only they can split); dbt cannot read our YAML, so the pipeline writes it as a table.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from pyspark_jobs.config import LakehouseConfig

ENTITIES_TABLE = "lakehouse.entities"
_SCHEMA = (
    "source string, entity string, table_name string, entity_kind string, "
    "key_columns array<string>, columns map<string, string>"
)


def entity_rows(spark: SparkSession, config: LakehouseConfig) -> DataFrame:
    """One row per declared entity (config is small: built on the driver on purpose)."""
    rows = [
        (s.name, e.name, e.table, e.kind, list(e.key), dict(e.columns)) for s, e in config.tables()
    ]
    return spark.createDataFrame(rows, _SCHEMA)


def publish_entities(spark: SparkSession, config: LakehouseConfig) -> None:
    """Replace ``lakehouse.entities`` with the entities of ``config``."""
    spark.sql("create database if not exists lakehouse")
    (
        entity_rows(spark, config)
        .write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .saveAsTable(ENTITIES_TABLE)
    )
