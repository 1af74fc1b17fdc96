"""A table's version, id, size and rows per partition read from its Delta log: the same
answers as `describe history`, the files on disk and a count of the rows."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlparse

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.delta_log import (
    holds_files,
    latest_version,
    row_count,
    rows_per_partition,
    table_bytes,
    version_with_id,
)
from pyspark_jobs.job_names import counted_jobs
from pyspark_jobs.run_summary import counts_by


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

    with counted_jobs(spark) as jobs:
        assert latest_version(spark, "scratch.versions") == history == 3
    assert jobs() == 0

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


def test_a_table_holds_files_once_written_and_none_once_every_row_is_deleted(
    spark: SparkSession, empty_lake
):
    spark.sql("create database if not exists scratch")
    spark.sql(
        "create or replace table scratch.held (id bigint) using delta "
        "tblproperties (delta.enableDeletionVectors = true)"
    )
    with counted_jobs(spark) as jobs:
        assert not holds_files(spark, "scratch.held")  # created: nothing to scan
    assert jobs() == 0
    spark.sql("insert into scratch.held values (1), (2)")
    assert holds_files(spark, "scratch.held")
    spark.sql("delete from scratch.held where id = 1")  # a deletion vector: still a file
    assert holds_files(spark, "scratch.held")
    spark.sql("delete from scratch.held")
    assert spark.table("scratch.held").count() == 0
    assert not holds_files(spark, "scratch.held")

    # Without a checksum the log cannot tell: the table is scanned, as before.
    forget_checksums(spark, spark.sql("describe detail scratch.held").first()["location"])
    assert holds_files(spark, "scratch.held")


def counted(spark: SparkSession, table: str, column: str) -> dict[str, int]:
    rows = spark.table(table).groupBy(column).count().collect()
    return {str(r[column]): int(r["count"]) for r in rows}


def test_rows_in_all_and_per_partition_are_the_rows_a_count_finds_after_deletes_and_updates(
    spark: SparkSession, empty_lake
):
    spark.sql("create database if not exists scratch")
    spark.sql(
        "create or replace table scratch.parts (source string, id bigint) using delta "
        "partitioned by (source) tblproperties (delta.enableDeletionVectors = true)"
    )
    spark.sql("insert into scratch.parts select 'a', id from range(10)")
    spark.sql("insert into scratch.parts select 'b', id from range(4)")
    spark.sql("insert into scratch.parts select 'c', id from range(3)")
    # Deletion vectors mark rows gone without rewriting the files whose counts say 10 and 4.
    spark.sql("delete from scratch.parts where source = 'a' and id < 3")
    spark.sql("delete from scratch.parts where source = 'c'")
    spark.sql("update scratch.parts set id = id + 100 where source = 'b' and id = 0")
    deletes = spark.sql("describe history scratch.parts").where("operation = 'DELETE'")
    metrics = [r["operationMetrics"] for r in deletes.collect()]
    assert any(int(m.get("numDeletionVectorsAdded", 0)) > 0 for m in metrics), metrics

    expected = counted(spark, "scratch.parts", "source")
    assert expected == {"a": 7, "b": 4}
    assert rows_per_partition(spark, "scratch.parts", "source") == expected
    assert counts_by(spark, "scratch.parts", "source") == expected
    assert row_count(spark, "scratch.parts") == 11


def test_rows_per_partition_are_unknown_where_the_log_cannot_tell_and_counted_instead(
    spark: SparkSession, empty_lake
):
    spark.sql("create database if not exists scratch")
    spark.sql("create or replace table scratch.unsplit (source string, id bigint) using delta")
    spark.sql("insert into scratch.unsplit values ('a', 1), ('a', 2), ('b', 3)")
    # Not a partition column: the file list cannot say per source, but can in all.
    assert rows_per_partition(spark, "scratch.unsplit", "source") is None
    assert row_count(spark, "scratch.unsplit") == 3
    assert counts_by(spark, "scratch.unsplit", "source") == {"a": 2, "b": 1}

    spark.sql(
        "create or replace table scratch.unstated (source string, id bigint) using delta "
        "partitioned by (source)"
    )
    spark.sql("insert into scratch.unstated values ('a', 1)")
    spark.conf.set("spark.databricks.delta.stats.collect", "false")
    try:
        spark.sql("insert into scratch.unstated values ('a', 2), ('b', 3)")
    finally:
        spark.conf.unset("spark.databricks.delta.stats.collect")
    # A file written without statistics has no record count.
    assert rows_per_partition(spark, "scratch.unstated", "source") is None
    assert row_count(spark, "scratch.unstated") is None
    assert counts_by(spark, "scratch.unstated", "source") == {"a": 2, "b": 1}


def test_the_summarys_counts_of_an_empty_partitioned_table_are_empty(
    spark: SparkSession, empty_lake
):
    spark.sql("create database if not exists scratch")
    spark.sql(
        "create or replace table scratch.nothing (source string, id bigint) using delta "
        "partitioned by (source)"
    )
    assert rows_per_partition(spark, "scratch.nothing", "source") == {}
    assert row_count(spark, "scratch.nothing") == 0
    assert counts_by(spark, "scratch.missing_table", "source") == {}
