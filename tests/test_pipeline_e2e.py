"""End to end on the bundled samples: landing files -> bronze -> dbt silver -> gold."""

from __future__ import annotations

from datetime import datetime

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.config import LakehouseConfig
from pyspark_jobs.pipeline import run_pipeline
from pyspark_jobs.settings import Settings
from tests.conftest import reset_lake

pytestmark = pytest.mark.slow

MARKER = "__row_marker__"


def gold_rows(spark: SparkSession, table: str, columns: list[str]) -> list[tuple]:
    return sorted(tuple(r) for r in spark.table(table).select(*columns).collect())


def table_version(spark: SparkSession, table: str) -> int:
    return spark.sql(f"describe history {table} limit 1").first()["version"]


@pytest.fixture(scope="module")
def first_run(spark: SparkSession, settings: Settings, sample_config: LakehouseConfig) -> Settings:
    """One pipeline run on an empty lake, shared by this module's tests (they only read)."""
    reset_lake(spark, settings)
    assert run_pipeline(spark, settings, sample_config, log=lambda _: None) == 0
    return settings


def test_debezium_gold_rows_are_the_samples_net_state(spark: SparkSession, first_run: Settings):
    # 125 was created then deleted; the Kafka tombstone after its delete changes nothing.
    assert gold_rows(
        spark,
        "gold.users",
        [
            "USER_ID",
            "TAX_CODE",
            "NAME",
            "COINS",
            "_record_key",
            "_seq",
            "_source",
            "_event_ts",
            "_cell_ts",
        ],
    ) == [
        (
            123,
            "the-fiscal-code-123",
            "Mario",
            300000500,
            '{"USER_ID":"123"}',
            [1700000003000, 1030, 3],
            "shop_debezium",
            datetime(2023, 11, 14, 22, 13, 23),
            None,
        ),
        (
            124,
            "the-fiscal-code-124",
            "Lara Croft",
            42,
            '{"USER_ID":"124"}',
            [1700000005000, 1050, 6],
            "shop_debezium",
            datetime(2023, 11, 14, 22, 13, 25),
            None,
        ),
    ]


def test_cassandra_gold_rows_follow_cells(spark: SparkSession, first_run: Settings):
    # 1001: partial update of email leaves the names as inserted.
    # 1002: a cell tombstone nulls last_name only.
    # 1003: row delete, then a null-payload tombstone that changes nothing.
    # 1004: UPDATE of a missing row creates it with just the cell it set.
    rows = gold_rows(
        spark,
        "gold.customers",
        [
            "id",
            "registration_date",
            "first_name",
            "last_name",
            "email",
            "_seq",
            "_source",
            "_cell_ts",
        ],
    )
    assert rows == [
        (
            1001,
            1562202942545,
            "Anne",
            "Kretchmar",
            "annek_new@noanswer.org",
            [1562202942666490, 123456, 102],
            "inventory_cassandra",
            {
                MARKER: 1562202942666382,
                "first_name": 1562202942666382,
                "last_name": 1562202942666382,
                "email": 1562202942666490,
            },
        ),
        (
            1002,
            1562202950000,
            "Bob",
            None,
            "bob@noanswer.org",
            [1562202960000200, 123456, 310],
            "inventory_cassandra",
            {
                MARKER: 1562202950000100,
                "first_name": 1562202950000100,
                "last_name": 1562202960000200,
                "email": 1562202950000100,
            },
        ),
        (
            1004,
            1562202980000,
            "Dana",
            None,
            None,
            [1562202980000400, 123456, 520],
            "inventory_cassandra",
            {"first_name": 1562202980000400},
        ),
    ]


def test_gold_metadata_names_the_last_applied_change(spark: SparkSession, first_run: Settings):
    for table in ("gold.users", "gold.customers"):
        gold = spark.table(table).alias("g")
        log = spark.table("silver.change_log").alias("c")
        joined = gold.join(
            log,
            (F.col("g._record_key") == F.col("c.record_key")) & (F.col("g._seq") == F.col("c.seq")),
        ).select("g._change_id", "c.change_id", "c.event_ts", "g._event_ts", "g._updated_at")
        rows = joined.collect()
        assert len(rows) == gold.count() > 0
        for row in rows:
            assert row[0] == row[1]
            assert row[2] == row[3]
            assert row[4] is not None


def test_second_run_changes_nothing(spark: SparkSession, first_run: Settings, sample_config):
    before = {
        t: (table_version(spark, t), gold_rows(spark, t, spark.table(t).columns))
        for t in ("gold.users", "gold.customers", "bronze.cdc_raw", "silver.change_log")
    }
    assert run_pipeline(spark, first_run, sample_config, log=lambda _: None) == 0
    after = {
        t: (table_version(spark, t), gold_rows(spark, t, spark.table(t).columns)) for t in before
    }
    assert after == before


def test_bronze_keeps_every_sample_record(spark: SparkSession, first_run: Settings):
    counts = {
        r["source"]: (r["n"], r["tombstones"])
        for r in spark.table("bronze.cdc_raw")
        .groupBy("source")
        .agg(F.count("*").alias("n"), F.count_if(F.col("value").isNull()).alias("tombstones"))
        .collect()
    }
    assert counts == {
        "shop_debezium": (7, 1),
        "inventory_cassandra": (8, 1),
        "crm_db2": (5, 1),
        "erp_goldengate": (6, 0),
        "inventory_opencdc": (5, 0),
        "social_tigergraph": (12, 0),
        "contacts_entity_patches": (5, 0),
        "fastdata_pr_update": (8, 0),
    }
    assert spark.table("bronze.cdc_quarantine").count() == 0
