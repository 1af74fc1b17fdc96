"""The silver step runs dbt only when there is something to build (pyspark_jobs/silver/build.py)."""

from __future__ import annotations

import re
from pathlib import Path

from pyspark.sql import SparkSession

from pyspark_jobs.bronze.ingest import ingest
from pyspark_jobs.config import load_config
from pyspark_jobs.settings import Settings
from pyspark_jobs.silver.build import BUILDS_TABLE, SILVER_TABLES, build_silver
from pyspark_jobs.silver.entity_registry import ENTITIES_TABLE
from tests.silver.landing import copy_sample, record, write_config, write_lines
from tests.support.killed_creation import leave_killed_creation

EVENT = {
    "op": "c",
    "before": None,
    "after": {"USER_ID": 990, "TAX_CODE": "tc-990", "NAME": "Cy", "COINS": 1},
    "source": {"db": "shop", "schema": "public", "table": "users", "ts_ms": 1700000900000,
               "lsn": 99001},
    "ts_ms": 1700000900001,
}  # fmt: skip


def test_nothing_new_skips_dbt_and_new_bronze_runs_only_the_incremental_models(
    spark: SparkSession, empty_lake: Settings, tmp_path: Path
):
    landing = tmp_path / "landing"
    copy_sample("debezium", landing)
    config = load_config(write_config(tmp_path / "sources.yml", {"shop_debezium": landing}))
    quiet = {"log": lambda _: None}
    # What kills inside each table's creation left: the first build creates them over it.
    for table in (BUILDS_TABLE, ENTITIES_TABLE, *SILVER_TABLES):
        leave_killed_creation(spark, table)

    ingest(spark, empty_lake, config, **quiet)
    first = build_silver(spark, empty_lake, config, **quiet)
    logged = spark.table("silver.change_log").count()
    again = build_silver(spark, empty_lake, config, **quiet)

    write_lines(landing / "more.jsonl", [record("shop.public.users", 900, {"USER_ID": 990}, EVENT)])
    ingest(spark, empty_lake, config, **quiet)
    more = build_silver(spark, empty_lake, config, **quiet)

    assert (first.kind, again.kind, more.kind) == ("full", "skipped", "incremental")
    assert again.bronze_version == first.bronze_version < more.bronze_version
    new = spark.table("silver.change_log").where('record_key = \'{"USER_ID":"990"}\'')
    assert spark.table("silver.change_log").count() == logged + 1
    assert [r["op"] for r in new.collect()] == ["upsert"]


def _unioned_formats(spark: SparkSession) -> list[str]:
    """The staging models the keyed view's stored definition reads."""
    text = spark.sql("show create table staging.int_change_log__keyed").first()[0]  # type: ignore[index]
    return sorted(set(re.findall(r"stg_cdc__(\w+)", text)))


def test_the_keyed_view_unions_only_the_configured_formats_and_a_new_format_rebuilds_it(
    spark: SparkSession, empty_lake: Settings, tmp_path: Path
):
    quiet = {"log": lambda _: None}
    debezium, cassandra = tmp_path / "debezium", tmp_path / "cassandra"
    copy_sample("debezium", debezium)
    copy_sample("cassandra", cassandra)
    one = load_config(write_config(tmp_path / "one.yml", {"shop_debezium": debezium}))
    ingest(spark, empty_lake, one, **quiet)
    first = build_silver(spark, empty_lake, one, **quiet)
    assert _unioned_formats(spark) == ["debezium"]

    both = load_config(
        write_config(
            tmp_path / "both.yml", {"shop_debezium": debezium, "inventory_cassandra": cassandra}
        )
    )
    ingest(spark, empty_lake, both, **quiet)
    second = build_silver(spark, empty_lake, both, **quiet)

    assert (first.kind, second.kind) == ("full", "full")
    assert _unioned_formats(spark) == ["cassandra", "debezium"]
    logged = {r["format"] for r in spark.table("silver.change_log").select("format").collect()}
    assert logged == {"cassandra", "debezium"}
