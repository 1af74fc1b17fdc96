"""What a process killed inside ``create table`` leaves: the table's first Delta commit in
its managed folder, and no catalog entry."""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import SparkSession


def leave_killed_creation(spark: SparkSession, name: str) -> None:
    """Commit a creation in managed table ``name``'s folder without registering it."""
    schema, _, table = name.rpartition(".")
    spark.sql(f"create database if not exists {schema}")
    location = f"{spark.catalog.getDatabase(schema).locationUri.rstrip('/')}/{table}"
    DeltaTable.create(spark).location(location).addColumn("leftover", "string").execute()
    assert not spark.catalog.tableExists(name)
