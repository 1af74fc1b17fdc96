"""Which change-log rows gold has not applied yet, tracked by silver table version.

Gold follows ``silver.change_log`` through Delta's change data feed: each gold table
remembers the last change-log version it applied, so a run reads exactly the commits
after it, whatever the wall clock says.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.gold.tables import PROGRESS_TABLE

CHANGE_LOG_TABLE = "silver.change_log"


def latest_version(spark: SparkSession, table: str) -> int:
    """The table's current Delta version."""
    return int(
        spark.sql(f"describe history {table} limit 1").select("version").first()[0]  # type: ignore[index]
    )


def applied_versions(spark: SparkSession) -> DataFrame:
    """``table_name``, ``silver_version`` of the last change-log version applied per table."""
    return (
        spark.table(PROGRESS_TABLE)
        .groupBy("table_name")
        .agg(F.max("silver_version").alias("silver_version"))
    )


def changes_between(spark: SparkSession, after_version: int, up_to_version: int) -> DataFrame:
    """Change-log rows committed in versions ``(after_version, up_to_version]``, with the
    ``_commit_version`` that added each (tables further along filter on it)."""
    if after_version >= up_to_version:
        return (
            spark.table(CHANGE_LOG_TABLE)
            .withColumn("_commit_version", F.lit(0).cast("bigint"))
            .limit(0)
        )
    return (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", after_version + 1)
        .option("endingVersion", up_to_version)
        .table(CHANGE_LOG_TABLE)
        .where(F.col("_change_type") == "insert")
        .drop("_change_type", "_commit_timestamp")
    )


def change_log_as_of(spark: SparkSession, version: int) -> DataFrame:
    """The whole change log as of ``version``: the full history the re-folds read."""
    return spark.read.format("delta").option("versionAsOf", version).table(CHANGE_LOG_TABLE)


def record_progress(spark: SparkSession, table_names: list[str], silver_version: int) -> None:
    """Remember that ``table_names`` reflect the change log up to ``silver_version``
    (one commit for all tables of a run)."""
    if not table_names:
        return
    spark.createDataFrame(
        [(t, silver_version) for t in table_names], "table_name string, silver_version bigint"
    ).withColumn("applied_at", F.current_timestamp()).write.format("delta").mode(
        "append"
    ).saveAsTable(PROGRESS_TABLE)
