"""Whether the catalog has a table: the catalog's answer, without loading the table."""

from __future__ import annotations

import shutil
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from pyspark_jobs.catalog import table_exists
from pyspark_jobs.settings import PROJECT_ROOT


def test_a_table_exists_as_the_catalog_names_it(spark: SparkSession, empty_lake):
    spark.sql("create database if not exists scratch")
    spark.sql("create or replace table scratch.present (id bigint) using delta")
    spark.sql("create or replace view scratch.present_view as select id from scratch.present")

    assert table_exists(spark, "scratch.present")
    assert table_exists(spark, "`scratch`.`present`")
    assert table_exists(spark, "SCRATCH.PRESENT")  # the metastore's names are lower case
    assert table_exists(spark, "scratch.present_view")
    assert not table_exists(spark, "scratch.absent")
    assert not table_exists(spark, "no_such_schema.present")

    spark.sql("drop view scratch.present_view")
    spark.sql("drop table scratch.present")
    assert not table_exists(spark, "scratch.present")
    assert not table_exists(spark, "scratch.present_view")


def test_the_answer_does_not_load_the_table(spark: SparkSession, empty_lake):
    """A registered table whose folder is gone still exists for the catalog: the lookup
    never reads the table's log (``spark.catalog.tableExists`` loads the table, and
    fails here)."""
    spark.sql("create database if not exists scratch")
    spark.sql("create or replace table scratch.emptied (id bigint) using delta")
    location = spark.sql("describe detail scratch.emptied").first()["location"]
    shutil.rmtree(urlparse(location).path)

    assert table_exists(spark, "scratch.emptied")
    spark.sql("drop table scratch.emptied")


def test_no_module_asks_spark_catalog_table_exists():
    """Every existence check of the pipeline goes through ``table_exists``: Spark's own
    loads the table (a Delta log listing and snapshot update each time)."""
    callers = [
        str(path.relative_to(PROJECT_ROOT))
        for path in sorted((PROJECT_ROOT / "pyspark_jobs").rglob("*.py"))
        if "catalog.tableExists(" in path.read_text()
    ]
    assert callers == []
