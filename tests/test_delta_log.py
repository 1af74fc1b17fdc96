"""A table's version and id read from its Delta log: the same answer as `describe history`,
without a Spark job."""

from __future__ import annotations

from pyspark.sql import SparkSession

from pyspark_jobs.delta_log import latest_version, version_with_id


def jobs_so_far(spark: SparkSession) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


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
