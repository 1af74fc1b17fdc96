"""A table's version, id and size read from its Delta log: the same answers as `describe
history` and the files on disk, without a Spark job."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlparse

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.delta_log import latest_version, table_bytes, version_with_id


def jobs_so_far(spark: SparkSession) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def forget_checksums(spark: SparkSession, location: str) -> None:
    """Delete the table's checksum files, and the snapshots this JVM keeps (a commit's own
    snapshot carries the checksum it computed)."""
    for crc in (Path(urlparse(location).path) / "_delta_log").glob("*.crc"):
        crc.unlink()
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # type: ignore[union-attr]


def test_the_logs_version_is_describe_historys_and_runs_no_spark_job(
    spark: SparkSession, empty_lake
):
    spark.sql("create database if not exists scratch")
    spark.sql("create or replace table scratch.versions (id bigint) using delta")
    for n in range(3):
        spark.sql(f"insert into scratch.versions values ({n})")
    history = spark.sql("describe history scratch.versions limit 1").first()["version"]

    before = jobs_so_far(spark)
    assert latest_version(spark, "scratch.versions") == history == 3
    assert jobs_so_far(spark) == before

    spark.sql("insert into scratch.versions values (9)")  # seen at once: no stale snapshot
    assert latest_version(spark, "scratch.versions") == 4


def test_a_table_created_again_has_another_id_at_the_same_version(spark: SparkSession, empty_lake):
    spark.sql("create database if not exists scratch")
    spark.sql("drop table if exists scratch.again")
    spark.sql("create table scratch.again (id bigint) using delta")
    first = version_with_id(spark, "scratch.again")
    spark.sql("drop table scratch.again")
    spark.sql("create table scratch.again (id bigint) using delta")
    second = version_with_id(spark, "scratch.again")
    assert first.endswith("@0") and second.endswith("@0") and first != second


def test_a_tables_size_is_its_files_size_and_unknown_without_a_checksum(
    spark: SparkSession, empty_lake
):
    spark.sql("create database if not exists scratch")
    spark.sql("create or replace table scratch.sized (id bigint, s string) using delta")
    spark.sql("insert into scratch.sized values (1, 'a'), (2, 'b')")
    location = spark.sql("describe detail scratch.sized").first()["location"]
    files = {r[0] for r in spark.table("scratch.sized").select(F.input_file_name()).collect()}
    on_disk = sum(os.path.getsize(urlparse(f).path) for f in files)
    assert table_bytes(spark, "scratch.sized") == on_disk > 0, location

    forget_checksums(spark, location)
    assert table_bytes(spark, "scratch.sized") is None
