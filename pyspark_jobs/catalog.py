"""Whether the catalog has a table, asked of the session catalog alone.

``spark.catalog.tableExists`` answers by loading the table (Spark's ``getTable``): for a
Delta table its catalog entry, its log listed and its snapshot brought up to date, about
22 ms a table in a warm session on 2 cores. The session catalog's own lookup is one
metastore call, about 3 ms. A run asks this of every gold table several times (their
layouts, whether a step may run interpreted, the gates' inputs), changed or not: over 24
tables, 0.3 s of gold's 1.6 s when nothing is new, alone in a warm session (docs/gold.md).

The answer is the catalog's: a table registered there exists even if its folder is gone
(reading it then fails with Delta's own error, where ``spark.catalog.tableExists`` raised
one itself). Temporary views are not tables here: every name asked is a schema's table.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession


def table_identifier(spark: SparkSession, name: str) -> Any:
    """The JVM ``TableIdentifier`` of ``name`` (``schema.table``), parsed as SQL names it."""
    return spark._jsparkSession.sessionState().sqlParser().parseTableIdentifier(name)


def table_exists(spark: SparkSession, name: str) -> bool:
    """Whether the session catalog has table (or view) ``name`` (``schema.table``)."""
    state = spark._jsparkSession.sessionState()
    return bool(state.catalog().tableExists(table_identifier(spark, name)))
