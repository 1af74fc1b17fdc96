"""The silver step runs dbt only when there is something to build (pyspark_jobs/silver/build.py)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from pyspark_jobs.bronze.ingest import ingest
from pyspark_jobs.config import load_config
from pyspark_jobs.settings import Settings
from pyspark_jobs.silver.build import build_silver
from tests.silver.landing import copy_sample, record, write_config, write_lines

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
