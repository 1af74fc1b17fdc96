"""Whether the catalog has a table: the catalog's answer, without loading the table;
within a run, the answers kept until the run drops the table or ends."""

from __future__ import annotations

import shutil
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from pyspark_jobs.catalog import (
    forget_lookups,
    forget_table,
    kept_lookup,
    lookups_kept,
    table_exists,
)
from pyspark_jobs.delta_log import version_with_id
from pyspark_jobs.gold.staging import PENDING_TABLE, ensure_pending_table
from pyspark_jobs.settings import PROJECT_ROOT
from tests.support.metastore import hive_client_calls


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


def test_within_a_run_a_found_table_is_not_looked_up_again(spark: SparkSession, empty_lake):
    """Kept answers are the run's: a table dropped behind the run's back still reads as
    found until it is forgotten, and after the run it is looked up again."""
    spark.sql("create database if not exists scratch")
    spark.sql("create or replace table scratch.kept (id bigint) using delta")
    with lookups_kept():
        calls = hive_client_calls(spark)
        assert table_exists(spark, "scratch.kept")
        assert hive_client_calls(spark) > calls
        calls = hive_client_calls(spark)
        assert table_exists(spark, "`SCRATCH`.`kept`")
        assert hive_client_calls(spark) == calls

        spark.sql("drop table scratch.kept")
        assert table_exists(spark, "scratch.kept")
        forget_table("scratch.kept")
        assert not table_exists(spark, "scratch.kept")

        spark.sql("create table scratch.kept (id bigint) using delta")
        assert table_exists(spark, "scratch.kept")
    spark.sql("drop table scratch.kept")
    assert not table_exists(spark, "scratch.kept")


def test_a_lookup_is_kept_for_the_run_and_no_longer():
    looked_up: list[str] = []

    def look_up() -> str:
        looked_up.append("s.t")
        return f"entry {len(looked_up)}"

    assert kept_lookup("s.t", "entry", look_up) == "entry 1"
    assert kept_lookup("s.t", "entry", look_up) == "entry 2"  # outside a run: each time
    with lookups_kept():
        assert kept_lookup("s.t", "entry", look_up) == "entry 3"
        with lookups_kept():  # a block inside the run's keeps the run's answers
            assert kept_lookup("S.T", "entry", look_up) == "entry 3"
        assert kept_lookup("s.t", "entry", look_up) == "entry 3"
        forget_table("s.t")
        assert kept_lookup("s.t", "entry", look_up) == "entry 4"
        forget_lookups()
        assert kept_lookup("s.t", "entry", look_up) == "entry 5"
    assert kept_lookup("s.t", "entry", look_up) == "entry 6"


def test_a_pending_table_of_an_older_layout_is_replaced_within_a_run(
    spark: SparkSession, empty_lake
):
    """The run drops it and creates it again: what it then reads of the table, the
    catalog's answer and the table's log, is the new table's."""
    spark.sql("create database if not exists lakehouse")
    spark.sql(f"create table {PENDING_TABLE} (silver_version bigint) using delta")
    spark.sql(f"insert into {PENDING_TABLE} values (1)")
    with lookups_kept():
        old = version_with_id(spark, PENDING_TABLE)
        assert old.endswith("@1")

        ensure_pending_table(spark)

        assert table_exists(spark, PENDING_TABLE)
        new = version_with_id(spark, PENDING_TABLE)
        assert new.endswith("@0") and new.split("@")[0] != old.split("@")[0]
        assert "row_kind" in spark.table(PENDING_TABLE).columns
