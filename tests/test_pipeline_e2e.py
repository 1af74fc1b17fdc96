"""End to end on the bundled samples: landing files -> bronze -> dbt silver -> gold.

The samples are copied to a landing area of the test, so the last test can land them
again under new offsets, as a replaying producer would.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.config import LakehouseConfig
from pyspark_jobs.delta_log import latest_version
from pyspark_jobs.pipeline import run_pipeline
from pyspark_jobs.settings import Settings
from tests.conftest import copy_of_samples, gold_table_names, reset_lake

pytestmark = pytest.mark.slow

MARKER = "__row_marker__"
METADATA = ("_seq", "_change_id", "_source", "_event_ts", "_updated_at")


def gold_rows(spark: SparkSession, table: str, columns: list[str]) -> list[tuple]:
    return sorted(tuple(r) for r in spark.table(table).select(*columns).collect())


def snapshot(spark: SparkSession, table: str) -> tuple[int, list[tuple]]:
    """The table's Delta version and all its rows: equal snapshots, nothing written."""
    return latest_version(spark, table), gold_rows(spark, table, spark.table(table).columns)


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> LakehouseConfig:
    return copy_of_samples(tmp_path_factory.mktemp("samples"))


@pytest.fixture(scope="module")
def first_run(spark: SparkSession, settings: Settings, config: LakehouseConfig) -> Settings:
    """One pipeline run on an empty lake, shared by this module's tests."""
    reset_lake(spark, settings)
    assert run_pipeline(spark, settings, config, log=lambda _: None) == 0
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


def test_full_row_sources_gold_rows(spark: SparkSession, first_run: Settings):
    # DB2: 124's null value deletes it; 123 keeps its later image.
    assert gold_rows(spark, "gold.crm_users", ["USER_ID", "TAX_CODE", "NAME", "COINS", "_seq"]) == [
        (123, "ABCDEF12B02M100O", "Mario Rossi", 150, [2]),
        (125, "ZZZNNA90C50F205Y", "Anna", 0, [4]),
    ]
    # GoldenGate: the key "1002_A1" alone (no before, no after) names the deleted line.
    assert gold_rows(spark, "gold.order_lines", ["ORDER_ID", "LINE_CODE", "QTY", "PRICE"]) == [
        (1001, "SKU_42", 3, Decimal("9.50")),
    ]
    # OpenCDC: snapshot rows are upserts; keys arrive as JSON or base64 bytes.
    assert gold_rows(spark, "gold.products", ["id", "name", "price", "in_stock"]) == [
        (1, "blood orange", 1.5, True),
        (3, "padlock", 7.5, False),
    ]
    # pr-update v1 (projectionName) and v2 (storageNamespace).
    assert gold_rows(
        spark, "gold.pr_registry", ["ID_USER", "TAX_CODE", "NAME", "SURNAME", "EMAIL", "updatedAt"]
    ) == [
        (
            "ebc12dc8-939b-447e-88ef-6ef0b802a487",
            "tax_code",
            "MARIO",
            "ROSSI",
            "mario@example.org",
            datetime(2022, 5, 20, 10, 27),
        ),
    ]
    assert gold_rows(
        spark, "gold.pr_customers", ["customer_id", "fiscal_code", "first_name", "last_name", "age"]
    ) == [
        ("24567", "99b81998-dd90-4bc8-8aea-62399f414d26", "Lara", "Croft", 29),
    ]


def test_tigergraph_gold_follows_ops_and_cascades(spark: SparkSession, first_run: Settings):
    # comp2 is created implicitly, as the source of a reverse_Creates edge; comp3 by an
    # insert-only with no attributes: both hold TigerGraph's attribute defaults.
    assert gold_rows(spark, "gold.tg_company", ["uid", "cid", "startDate"]) == [
        ("comp1", 2345, datetime(2001, 1, 1, 8)),
        ("comp2", 0, datetime(1970, 1, 1)),
        ("comp3", 0, datetime(1970, 1, 1)),
    ]
    # person1: age Add 1, name IgnoreIfExisted kept "Ann". person2 deleted.
    assert gold_rows(spark, "gold.tg_person", ["uid", "name", "age"]) == [("person1", "Ann", 31)]
    # Deleting person2 deletes both directions of its Creates edge; the Tag vertex type
    # delete removes every Tag; WorksAt was deleted by its own message.
    for table in ("gold.tg_tag", "gold.tg_creates", "gold.tg_reverse_creates", "gold.tg_works_at"):
        assert spark.table(table).count() == 0, table


def test_entity_patches_build_nested_documents(spark: SparkSession, first_run: Settings):
    rows = spark.table("gold.contacts").select(
        "entity", "firstName", "lastName", "age", "phone", "address", "tags"
    )
    documents = {
        r["entity"]: (
            r["firstName"],
            r["lastName"],
            r["age"],
            *(None if r[c] is None else json.loads(r[c]) for c in ("phone", "address", "tags")),
        )
        for r in rows.collect()
    }
    assert documents == {
        "400cb092-00af-4e44-bdcb-1a0c536692bf": (
            "Sally",
            "Anderson-Smith",
            None,
            {"home": "1-222-555-9999"},
            {"city": "Springfield"},
            None,
        ),
        "7d1f3c2e-5b0a-4c8e-9f61-2a4b8c9d0e11": (
            "Bob",
            None,
            41,
            None,
            None,
            ["vip", "newsletter"],
        ),
    }


def test_gold_metadata_names_the_last_applied_change(
    spark: SparkSession, first_run: Settings, config: LakehouseConfig
):
    for table in gold_table_names(config):
        if table == "gold.tg_company":
            continue  # comp2 exists only implicitly, as the source of an edge (see below)
        gold = spark.table(table).alias("g")
        log = spark.table("silver.change_log").alias("c")
        joined = gold.join(
            log,
            (F.col("g._record_key") == F.col("c.record_key")) & (F.col("g._seq") == F.col("c.seq")),
        ).select("g._change_id", "c.change_id", "c.event_ts", "g._event_ts", "g._updated_at")
        rows = joined.collect()
        assert len(rows) == gold.count(), table
        for row in rows:
            assert row[0] == row[1]
            assert row[2] == row[3]
            assert row[4] is not None


def test_second_run_changes_nothing(spark: SparkSession, first_run: Settings, config):
    tables = ["bronze.cdc_raw", "silver.change_log", *gold_table_names(config)]
    before = {t: snapshot(spark, t) for t in tables}
    assert run_pipeline(spark, first_run, config, log=lambda _: None) == 0
    assert {t: snapshot(spark, t) for t in tables} == before


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


# Last: it lands more files.
def test_samples_landed_again_under_new_offsets_leave_gold_unchanged(
    spark: SparkSession, first_run: Settings, config: LakehouseConfig
):
    """A producer replays every sample under new Kafka offsets.

    Sources with a position of their own (every format but DB2 and pr-update v2) give
    the replay the same change_id, so silver keeps each change once and gold is not
    written at all. DB2 and pr-update v2 messages carry no position: the replay is a new
    change with a later seq, re-applied in the same order, so those rows end with the
    same values and move only their change metadata.
    """
    tables = gold_table_names(config)
    data = {t: [c for c in spark.table(t).columns if not c.startswith("_")] for t in tables}
    before = {t: snapshot(spark, t) for t in tables}
    values_before = {t: gold_rows(spark, t, data[t]) for t in tables}
    for source in config.sources:
        assert source.landing is not None
        for landed in sorted(Path(source.landing).glob("*.jsonl")):
            # Only the record's own offset changes (the first "offset" of each line, before
            # the value): key and value stay byte for byte what the producer sent.
            replay = [
                re.sub(r'"offset":(\d+)', lambda m: f'"offset":{int(m[1]) + 1000}', line, count=1)
                for line in landed.read_text().splitlines()
            ]
            landed.with_name(f"replay-{landed.name}").write_text("".join(f"{r}\n" for r in replay))

    lines: list[str] = []
    assert run_pipeline(spark, first_run, config, log=lines.append) == 0, "\n".join(lines)

    assert spark.table("bronze.cdc_raw").count() == 2 * 56
    moved = {"gold.crm_users", "gold.pr_customers"}
    for table in tables:
        assert gold_rows(spark, table, data[table]) == values_before[table], table
        if table not in moved:
            assert snapshot(spark, table) == before[table], table
    assert gold_rows(spark, "gold.crm_users", ["USER_ID", "_seq"]) == [(123, [1002]), (125, [1004])]
