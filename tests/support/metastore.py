"""How many calls the shared session's JVM made to the metastore: a step's lookups."""

from __future__ import annotations

from pyspark.sql import SparkSession


def hive_client_calls(spark: SparkSession) -> int:
    """The calls this JVM made to the metastore so far."""
    metrics = spark._jvm.org.apache.spark.metrics.source.HiveCatalogMetrics  # type: ignore[union-attr]
    return int(metrics.METRIC_HIVE_CLIENT_CALLS().getCount())
