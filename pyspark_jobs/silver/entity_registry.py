"""Publish the declared entities of config/sources.yml as ``lakehouse.entities`` for dbt.

Silver needs the declared key columns (a GoldenGate key is one ``_``-joined string that
only they can split); dbt cannot read our YAML, so the pipeline writes it as a table.
"""

from __future__ import annotations

import hashlib
import json

from pyspark.sql import DataFrame, SparkSession

from pyspark_jobs.catalog import table_exists
from pyspark_jobs.config import LakehouseConfig

ENTITIES_TABLE = "lakehouse.entities"
_FINGERPRINT = "lakehouse.entities.fingerprint"
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


def entities_fingerprint(config: LakehouseConfig) -> str:
    """A hash of the declared entities (what ``entity_rows`` holds)."""
    rows = [
        (s.name, e.name, e.table, e.kind, list(e.key), dict(e.columns)) for s, e in config.tables()
    ]
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:16]


def _published_fingerprint(spark: SparkSession) -> str | None:
    if not table_exists(spark, ENTITIES_TABLE):
        return None
    found = spark.sql(f"show tblproperties {ENTITIES_TABLE} ('{_FINGERPRINT}')").first()
    return None if found is None else str(found["value"])


def publish_entities(spark: SparkSession, config: LakehouseConfig) -> bool:
    """Make ``lakehouse.entities`` hold the entities of ``config``; False when it already
    did (the table keeps their fingerprint as a property: no rewrite, no read)."""
    fingerprint = entities_fingerprint(config)
    if _published_fingerprint(spark) == fingerprint:
        return False
    spark.sql("create database if not exists lakehouse")
    (
        entity_rows(spark, config)
        .write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .saveAsTable(ENTITIES_TABLE)
    )
    spark.sql(
        f"alter table {ENTITIES_TABLE} set tblproperties ('{_FINGERPRINT}' = '{fingerprint}')"
    )
    return True
