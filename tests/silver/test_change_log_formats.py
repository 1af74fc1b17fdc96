"""Silver for every format: samples and edge cases through real bronze ingest and dbt.

Three pipeline runs in this module, shared by its tests (each dbt run costs seconds):
1. samples + edge cases -> exact change-log rows per format, exact rejects, and the silver
   gate's reconciliation of every bronze record;
2. the same records redelivered under new offsets + one new change, after a change-log row
   and two of its constraints were removed -> only the new change lands (redelivery
   recognised, old bronze not re-read), and the constraints are back;
3. ``--full-refresh`` -> the log rebuilt: run 1's rows plus run 2's new change.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql import SparkSession

from pyspark_jobs.bronze.ingest import ingest
from pyspark_jobs.config import LakehouseConfig, load_config
from pyspark_jobs.delta_log import latest_version
from pyspark_jobs.quality.frames import silver_reconciliation
from pyspark_jobs.settings import Settings
from pyspark_jobs.silver.dbt_runner import run_dbt
from pyspark_jobs.silver.entity_registry import publish_entities
from tests.conftest import reset_lake
from tests.silver.cases import CLIENT, E1, E2, EDGE_CASES
from tests.silver.landing import copy_sample, record, sample_records, write_config, write_lines

pytestmark = pytest.mark.slow

SAMPLE_FORMATS = {
    "shop_debezium": "debezium",
    "crm_db2": "db2",
    "erp_goldengate": "goldengate",
    "inventory_opencdc": "opencdc",
    "social_tigergraph": "tigergraph",
    "contacts_entity_patches": "debezium_patch",
    "fastdata_pr_update": "pr_update",
}
LOG_COLUMNS = "change_id, entity, op, record_key, seq, position, row_image, changes, lineage.offset"
# The pipeline's models: the marts read gold, which these tests do not build.
PIPELINE = ["--select", "tag:pipeline"]


def silver(spark: SparkSession, settings: Settings, config: LakehouseConfig, *args: str) -> None:
    ingest(spark, settings, config, log=lambda _: None)
    publish_entities(spark, config)
    run_dbt(settings, ["run", *PIPELINE, *args])


def log_rows(spark: SparkSession, fmt: str) -> list[tuple]:
    """(entity, op, record_key, seq, position, row_image, changes) in per-key seq order."""
    rows = spark.sql(
        "select entity, op, record_key, seq, position, row_image, changes "
        f"from silver.change_log where format = '{fmt}' order by entity, record_key, seq"
    ).collect()
    return [
        (*r[:6], None if r[6] is None else {k: tuple(v) for k, v in r[6].items()}) for r in rows
    ]


def whole_log(spark: SparkSession) -> set[tuple]:
    return {
        (
            r[0],
            r[1],
            r[2],
            r[3],
            tuple(r[4]),
            r[5],
            r[6],
            None if r[7] is None else tuple(sorted((k, tuple(v)) for k, v in r[7].items())),
            r[8],
        )
        for r in spark.sql(f"select {LOG_COLUMNS} from silver.change_log").collect()
    }


@pytest.fixture(scope="module")
def lake(
    spark: SparkSession, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Run 1 on an empty lake: the samples plus each format's edge cases."""
    reset_lake(spark, settings)
    root = tmp_path_factory.mktemp("silver_landing")
    landings = {name: root / name for name in EDGE_CASES}
    for name, fmt in SAMPLE_FORMATS.items():
        copy_sample(fmt, landings[name])
    for name, cases in EDGE_CASES.items():
        write_lines(landings[name] / "edge_cases.jsonl", cases())
    config = load_config(write_config(root / "config" / "sources.yml", landings))
    silver(spark, settings, config)
    return {"config": config, "landings": landings, "log": whole_log(spark)}


def test_debezium_upserts_deletes_and_truncates_and_skips_message_events(spark, lake):
    t = "shop.users"

    def image(uid: int, name: str, coins: int) -> str:
        return (
            f'{{"USER_ID":{uid},"TAX_CODE":"the-fiscal-code-{uid}","NAME":"{name}",'
            f'"COINS":{coins}}}'
        )

    assert log_rows(spark, "debezium") == [
        (
            t,
            "upsert",
            '{"USER_ID":"123"}',
            [1700000001000, 1010, 1],
            "debezium:1010",
            image(123, "Mario", 300000000),
            None,
        ),
        (
            t,
            "upsert",
            '{"USER_ID":"123"}',
            [1700000003000, 1030, 3],
            "debezium:1030",
            image(123, "Mario", 300000500),
            None,
        ),
        (
            t,
            "upsert",
            '{"USER_ID":"124"}',
            [1700000000000, 1000, 0],
            "debezium:1000",
            image(124, "Lara", 42),
            None,
        ),
        (
            t,
            "upsert",
            '{"USER_ID":"124"}',
            [1700000005000, 1050, 6],
            "debezium:1050",
            image(124, "Lara Croft", 42),
            None,
        ),
        (
            t,
            "upsert",
            '{"USER_ID":"125"}',
            [1700000002000, 1020, 2],
            "debezium:1020",
            image(125, "Anne", 7),
            None,
        ),
        # the delete keeps its before image; the tombstone after it is no change
        (
            t,
            "delete",
            '{"USER_ID":"125"}',
            [1700000004000, 1040, 4],
            "debezium:1040",
            image(125, "Anne", 7),
            None,
        ),
        # op t: the whole table, at its own position; the message events (op m) are skipped
        (t, "truncate", "{}", [1700000100102, 1120, 102], "debezium:1120", None, None),
    ]


def test_db2_upserts_whole_rows_and_deletes_by_key_in_kafka_order(spark, lake):
    key_123 = '{"USER_ID":"123","TAX_CODE":"ABCDEF12B02M100O"}'
    key_124 = '{"USER_ID":"124","TAX_CODE":"LRACFT80A41H501X"}'
    key_125 = '{"USER_ID":"125","TAX_CODE":"ZZZNNA90C50F205Y"}'
    t = "crm.DB2INST1.USERS"
    assert log_rows(spark, "db2") == [
        (
            t,
            "upsert",
            key_123,
            [0],
            f"kafka:{t}:0:0",
            '{"USER_ID":123,"TAX_CODE":"ABCDEF12B02M100O","NAME":"Mario","COINS":100}',
            None,
        ),
        (
            t,
            "upsert",
            key_123,
            [2],
            f"kafka:{t}:0:2",
            '{"USER_ID":123,"TAX_CODE":"ABCDEF12B02M100O","NAME":"Mario Rossi","COINS":150}',
            None,
        ),
        (
            t,
            "upsert",
            key_124,
            [1],
            f"kafka:{t}:0:1",
            '{"USER_ID":124,"TAX_CODE":"LRACFT80A41H501X","NAME":"Lara","COINS":42}',
            None,
        ),
        (t, "delete", key_124, [3], f"kafka:{t}:0:3", None, None),
        (
            t,
            "upsert",
            key_125,
            [4],
            f"kafka:{t}:0:4",
            '{"USER_ID":125,"TAX_CODE":"ZZZNNA90C50F205Y","NAME":"Anna","COINS":0}',
            None,
        ),
    ]


def test_goldengate_splits_the_key_string_by_the_declared_columns(spark, lake):
    t = "ERP.ORDER_LINES"
    sku42 = '{"ORDER_ID":"1001","LINE_CODE":"SKU_42"}'
    sku7 = '{"ORDER_ID":"1001","LINE_CODE":"SKU7"}'
    a1 = '{"ORDER_ID":"1002","LINE_CODE":"A1"}'
    b2 = '{"ORDER_ID":"1004","LINE_CODE":"B_2"}'
    assert log_rows(spark, "goldengate") == [
        (
            t,
            "upsert",
            sku7,
            [101],
            "goldengate:101",
            '{"ORDER_ID":1001,"LINE_CODE":"SKU7","QTY":1,"PRICE":120}',
            None,
        ),
        (
            t,
            "delete",
            sku7,
            [103],
            "goldengate:103",
            '{"ORDER_ID":1001,"LINE_CODE":"SKU7","QTY":1,"PRICE":120}',
            None,
        ),
        (
            t,
            "upsert",
            sku42,
            [100],
            "goldengate:100",
            '{"ORDER_ID":1001,"LINE_CODE":"SKU_42","QTY":2,"PRICE":9.5}',
            None,
        ),
        (
            t,
            "upsert",
            sku42,
            [102],
            "goldengate:102",
            '{"ORDER_ID":1001,"LINE_CODE":"SKU_42","QTY":3,"PRICE":9.5}',
            None,
        ),
        (
            t,
            "upsert",
            a1,
            [104],
            "goldengate:104",
            '{"ORDER_ID":1002,"LINE_CODE":"A1","QTY":5,"PRICE":1.25}',
            None,
        ),
        # no image: the key string alone, split into the two key columns
        (t, "delete", a1, [105], "goldengate:105", None, None),
        # the out-of-order update (pos 199) sorts before the insert (pos 200)
        (
            t,
            "upsert",
            b2,
            [199],
            "goldengate:199",
            '{"ORDER_ID":1004,"LINE_CODE":"B_2","QTY":7,"PRICE":2}',
            None,
        ),
        (
            t,
            "upsert",
            b2,
            [200],
            "goldengate:200",
            '{"ORDER_ID":1004,"LINE_CODE":"B_2","QTY":1,"PRICE":2}',
            None,
        ),
    ]


def test_opencdc_decodes_base64_and_upserts_snapshots(spark, lake):
    p = "products"
    assert log_rows(spark, "opencdc") == [
        (
            p,
            "upsert",
            '{"id":"1"}',
            [0],
            "opencdc:snapshot:products:1",
            '{"id":1,"name":"orange","price":1.2,"in_stock":true}',
            None,
        ),
        (
            p,
            "upsert",
            '{"id":"1"}',
            [3],
            "opencdc:wal:0/16B37A0",
            '{"id":1,"name":"blood orange","price":1.5,"in_stock":true}',
            None,
        ),
        # base64 key {"id":2}; the delete's before is base64 "yellow", not a row: no image
        (
            p,
            "upsert",
            '{"id":"2"}',
            [1],
            "opencdc:snapshot:products:2",
            '{"id":2,"name":"yellow","price":0.8,"in_stock":true}',
            None,
        ),
        (p, "delete", '{"id":"2"}', [4], "opencdc:wal:0/16B3800", None, None),
        # raw key bytes "3": one-string key, checked against the image
        (
            p,
            "upsert",
            '{"id":"3"}',
            [2],
            "opencdc:wal:0/16B3748",
            '{"id":3,"name":"padlock","price":7.5,"in_stock":false}',
            None,
        ),
        (
            p,
            "upsert",
            '{"id":"8"}',
            [101],
            "opencdc:snapshot:products:8",
            '{"id":8,"name":"pear","price":2,"in_stock":true}',
            None,
        ),
    ]


def test_tigergraph_vertices_edges_and_truncates_follow_the_key_convention(spark, lake):
    ow = "Overwrite"
    tuple_list = '["i: 2, u: 0, f: 3, d: 3, dt: 1222819200, b: 0, s: m2"]'
    tuple_map = '{"2011-10-20":"i: 2, u: 0, f: 3, d: 3, dt: 1222819200, b: 0, s: m2"}'
    edge_changes = {
        "attr_list_tuple": ("Add", tuple_list, None),
        "attr_map_tuple": ("ReplaceOrAdd", tuple_map, None),
    }
    creates = (
        '{"from_type":"Person","from_uid":"person2","to_type":"Company",'
        '"to_uid":"comp2","discriminator":"c1:1"}'
    )
    reverse = (
        '{"from_type":"Company","from_uid":"comp2","to_type":"Person",'
        '"to_uid":"person2","discriminator":"c1:1"}'
    )
    works = (
        '{"from_type":"Person","from_uid":"person1","to_type":"Company",'
        '"to_uid":"comp3","discriminator":""}'
    )
    assert log_rows(spark, "tigergraph") == [
        (
            "Company",
            "patch",
            '{"uid":"comp1"}',
            [1701548849757, 1, 0, 0],
            "tigergraph:1|1701548849757|1|0",
            None,
            {"cid": (ow, "2345", None), "startDate": (ow, "2001-01-01 08:00:00", None)},
        ),
        (
            "Company",
            "insert_if_absent",
            '{"uid":"comp3"}',
            [1701569970000, 34, 0, 1],
            "tigergraph:1|1701569970000|34|1",
            None,
            {},
        ),
        (
            "Creates",
            "patch",
            creates,
            [1701569966031, 33, 0, 0],
            "tigergraph:1|1701569966031|33|0|0",
            '{"hasreverseedge":true}',
            edge_changes,
        ),
        # the out-of-order change (mid older than the creation) sorts first
        (
            "Person",
            "patch",
            '{"uid":"person1"}',
            [1701548849800, 1, 0, 1],
            "tigergraph:1|1701548849800|1|1",
            None,
            {"age": (ow, "29", None)},
        ),
        (
            "Person",
            "patch",
            '{"uid":"person1"}',
            [1701548850000, 2, 0, 0],
            "tigergraph:1|1701548850000|2|0",
            None,
            {"name": (ow, "Ann", None), "age": (ow, "30", None)},
        ),
        (
            "Person",
            "patch",
            '{"uid":"person1"}',
            [1701548852000, 4, 0, 0],
            "tigergraph:1|1701548852000|4|0",
            None,
            {"age": ("Add", "1", None), "name": ("IgnoreIfExisted", "Annie", None)},
        ),
        (
            "Person",
            "patch",
            '{"uid":"person2"}',
            [1701548851000, 3, 0, 0],
            "tigergraph:2|1701548851000|3|0",
            None,
            {"name": (ow, "Bob", None), "age": (ow, "41", None)},
        ),
        (
            "Person",
            "delete",
            '{"uid":"person2"}',
            [1701569990000, 36, 0, 0],
            "tigergraph:2|1701569990000|36|0",
            None,
            None,
        ),
        (
            "Tag",
            "patch",
            '{"uid":"t1"}',
            [1701548853000, 5, 0, 0],
            "tigergraph:1|1701548853000|5|0",
            None,
            {"label": (ow, "graph", None)},
        ),
        # a string uid that looks like JSON is a string: a key value like any other
        (
            "Tag",
            "patch",
            '{"uid":"{\\"id\\":\\"t9\\"}"}',
            [1701548864000, 13, 0, 0],
            "tigergraph:1|1701548864000|13|0",
            None,
            {"label": (ow, "braces", None)},
        ),
        (
            "Tag",
            "truncate",
            "{}",
            [1701569999000, 37, 0, 0],
            "tigergraph:1|1701569999000|37|0",
            None,
            None,
        ),
        (
            "WorksAt",
            "patch",
            works,
            [1701569970000, 34, 0, 0],
            "tigergraph:1|1701569970000|34|0",
            '{"hasreverseedge":false}',
            {"since": (ow, "2020-01-01", None)},
        ),
        (
            "WorksAt",
            "delete",
            works,
            [1701569980000, 35, 0, 0],
            "tigergraph:1|1701569980000|35|0",
            '{"hasreverseedge":false}',
            None,
        ),
        (
            "reverse_Creates",
            "patch",
            reverse,
            [1701569966031, 33, 0, 1],
            "tigergraph:1|1701569966031|33|0|1",
            '{"hasreverseedge":true}',
            edge_changes,
        ),
    ]


def test_entity_patches_become_one_row_per_op_in_order(spark, lake):
    def row(entity: str, seq: list[int], path: str, op: str, value: str | None) -> tuple:
        position = f"entity-patch:{CLIENT}:{seq[1]}:{seq[2]}:{seq[3]}"
        return (
            "Contacts",
            "patch",
            f'{{"entity":"{entity}"}}',
            seq,
            position,
            None,
            {path: (op, value, None)},
        )

    def delete(entity: str, seq: list[int]) -> tuple:
        position = f"entity-patch:{CLIENT}:{seq[1]}:{seq[2]}:{seq[3]}"
        return ("Contacts", "delete", f'{{"entity":"{entity}"}}', seq, position, None, None)

    assert log_rows(spark, "debezium_patch") == [
        row(E1, [1415747086227, 2, 1, 0], "firstName", "add", "Sally"),
        row(E1, [1415747086227, 2, 1, 1], "lastName", "add", "Anderson"),
        row(E1, [1415747086227, 2, 1, 2], "phone/home", "add", "1-222-555-1234"),
        row(E1, [1415747090000, 3, 1, 0], "phone/home", "replace", "1-222-555-9999"),
        row(E1, [1415747090000, 3, 1, 1], "phone/work", "add", "1-222-555-0000"),
        row(E1, [1415747090000, 3, 1, 2], "address/city", "add", "Springfield"),
        row(E1, [1415747100000, 5, 1, 0], "phone/work", "remove", None),
        row(E1, [1415747100000, 5, 1, 1], "lastName", "replace", "Anderson-Smith"),
        # remove of "/" deletes the entity; the add after it starts a new document
        delete(E1, [1415747200010, 10, 1, 0]),
        row(E1, [1415747200010, 10, 1, 1], "firstName", "add", "Sal"),
        row(E2, [1415747095000, 4, 1, 0], "firstName", "add", "Bob"),
        row(E2, [1415747095000, 4, 1, 1], "age", "add", "41"),
        row(E2, [1415747095000, 4, 2, 0], "tags", "add", '["vip","newsletter"]'),
        row(E2, [1415747200008, 8, 1, 0], "age", "replace", "42"),
        # remove of "" deletes the entity
        delete(E2, [1415747200009, 9, 1, 0]),
    ]


def test_pr_update_v1_and_v2_upsert_and_delete(spark, lake):
    u1, u2 = "ebc12dc8-939b-447e-88ef-6ef0b802a487", "0b5e7c1a-3f2d-4e8b-9a6c-1d2e3f4a5b6c"
    ingestion = "pr-update:test-tenant.PROD.food-delivery.registry.ingestion:0"
    v2_topic = "kafka:gt.fd-test.DEV.inventory.pr_customers.pr-update:0"
    lara = (
        '{"customer_id":"24567","fiscal_code":"99b81998-dd90-4bc8-8aea-62399f414d26",'
        '"first_name":"Lara","last_name":"Croft","age":'
    )
    nathan = (
        '{"customer_id":"24568","fiscal_code":"5f0c2a1e-8d3b-4a7c-b6e9-0c1d2e3f4a5b",'
        '"first_name":"Nathan","last_name":"Drake","age":35}'
    )
    luigi = (
        f'{{"ID_USER":"{u2}","TAX_CODE":"tax_code_2","NAME":"LUIGI","SURNAME":"VERDI",'
        '"EMAIL":"email_luigi","updatedAt":"2022-05-20T10:26:10.000Z","__STATE__":"PUBLIC"}'
    )

    def mario(email: str, at: str) -> str:
        return (
            f'{{"ID_USER":"{u1}","TAX_CODE":"tax_code","NAME":"MARIO","SURNAME":"ROSSI",'
            f'"EMAIL":"{email}","updatedAt":"{at}","__STATE__":"PUBLIC"}}'
        )

    lara_key = '{"customer_id":"24567","fiscal_code":"99b81998-dd90-4bc8-8aea-62399f414d26"}'
    nathan_key = '{"customer_id":"24568","fiscal_code":"5f0c2a1e-8d3b-4a7c-b6e9-0c1d2e3f4a5b"}'
    assert log_rows(spark, "pr_update") == [
        (
            "pr_customers",
            "upsert",
            lara_key,
            [1566656122000, 0],
            f"{v2_topic}:0",
            lara + "28}",
            None,
        ),
        (
            "pr_customers",
            "upsert",
            lara_key,
            [1566656160000, 2],
            f"{v2_topic}:2",
            lara + "29}",
            None,
        ),
        ("pr_customers", "upsert", nathan_key, [1566656130000, 1], f"{v2_topic}:1", nathan, None),
        ("pr_customers", "delete", nathan_key, [1566656220000, 3], f"{v2_topic}:3", nathan, None),
        (
            "pr_registry",
            "upsert",
            f'{{"ID_USER":"{u2}"}}',
            [1653042370020, 1],
            f"{ingestion}:468",
            luigi,
            None,
        ),
        (
            "pr_registry",
            "delete",
            f'{{"ID_USER":"{u2}"}}',
            [1653042480000, 3],
            f"{ingestion}:470",
            luigi,
            None,
        ),
        (
            "pr_registry",
            "upsert",
            f'{{"ID_USER":"{u1}"}}',
            [1653042356401, 0],
            f"{ingestion}:467",
            mario(email="email_mario", at="2022-05-20T10:25:56.380Z"),
            None,
        ),
        (
            "pr_registry",
            "upsert",
            f'{{"ID_USER":"{u1}"}}',
            [1653042420050, 2],
            f"{ingestion}:469",
            mario(email="mario@example.org", at="2022-05-20T10:27:00.000Z"),
            None,
        ),
    ]


def test_cassandra_valid_cells_land_beside_a_rejected_cell(spark, lake):
    assert log_rows(spark, "cassandra") == [
        (
            "inventory.customers",
            "patch",
            '{"id":"2001","registration_date":"1562203000000"}',
            [1562203000000100, 2, 10],
            "cassandra:commitlog-7-2.log:10",
            None,
            {
                "first_name": ("set", "Eve", 1562203000000100),
                "__row_marker__": ("set", None, 1562203000000100),
            },
        ),
    ]


def test_every_reject_reason_lands_in_the_rejects_table(spark, lake):
    rejects = sorted(
        tuple(r)
        for r in spark.sql(
            "select format, lineage.topic, lineage.offset, entity, reject_reason "
            "from silver.change_log_rejects"
        ).collect()
    )
    assert rejects == sorted(
        [
            (
                "cassandra",
                "events.inventory.customers",
                1,
                "inventory.customers",
                "a Cassandra cell is not an object",
            ),
            (
                "cassandra",
                "events.inventory.customers",
                2,
                "inventory.customers",
                'key column id is not a bigint: "x-2002"',
            ),
            (
                "cassandra",
                "events.inventory.customers",
                3,
                "inventory.customers",
                "field named twice inside the value",
            ),
            (
                "debezium",
                "shop.public.users",
                100,
                "shop.users",
                'key column USER_ID is not a bigint: "not-a-number-17"',
            ),
            (
                "debezium",
                "shop.public.users",
                101,
                "shop.users",
                'key column USER_ID is a JSON object, not a bigint: {"id":126}',
            ),
            ("debezium", "shop.public.users", 105, "shop.users", "unknown op code: x"),
            (
                "db2",
                "crm.DB2INST1.USERS",
                100,
                "crm.DB2INST1.USERS",
                "key columns missing: TAX_CODE",
            ),
            ("db2", "crm.DB2INST1.USERS", 101, "crm.DB2INST1.USERS", "delete without a key object"),
            (
                "db2",
                "crm.DB2INST1.USERS",
                102,
                "crm.DB2INST1.USERS",
                'key column USER_ID is not a bigint: "abc"',
            ),
            (
                "db2",
                "crm.DB2INST1.USERS",
                103,
                "crm.DB2INST1.USERS",
                'key column TAX_CODE is a JSON array, not a string: ["A","B"]',
            ),
            ("debezium_patch", "my-db.entity-patches", 100, "Contacts", "unknown op code: move"),
            ("debezium_patch", "my-db.entity-patches", 101, "Contacts", "no op field"),
            (
                "debezium_patch",
                "my-db.entity-patches",
                105,
                "Contacts",
                "add of the root path (only remove applies to the whole entity)",
            ),
            (
                "debezium_patch",
                "my-db.entity-patches",
                106,
                "Contacts",
                f'key column entity is a JSON array, not a string: ["{E1}","{E2}"]',
            ),
            (
                "debezium_patch",
                "my-db.entity-patches",
                107,
                "Contacts",
                "key column entity is a JSON boolean, not a string or number: true",
            ),
            (
                "debezium_patch",
                "my-db.entity-patches",
                108,
                "Contacts",
                'number 1e400 cannot be kept exactly: Spark reads it as "Infinity"',
            ),
            (
                "debezium_patch",
                "my-db.entity-patches",
                109,
                "Contacts",
                "field named twice inside an op",
            ),
            (
                "goldengate",
                "erp.ORDER_LINES",
                101,
                "ERP.ORDER_LINES",
                "key does not split into the declared key columns (ORDER_ID, LINE_CODE): "
                "1005_X_Y_Z",
            ),
            (
                "goldengate",
                "erp.ORDER_LINES",
                102,
                "ERP.ORDER_LINES",
                "key does not match the key columns of the row: 9_9 vs 1006_C",
            ),
            ("goldengate", "erp.ORDER_LINES", 103, "ERP.ORDER_LINES", "no op field"),
            ("goldengate", "erp.ORDER_LINES", 104, "ERP.ORDER_LINES", "unknown op code: T"),
            (
                "goldengate",
                "erp.ORDER_LINES",
                106,
                "ERP.ORDER_LINES",
                'key column ORDER_ID is not a bigint: "x1009"',
            ),
            (
                "goldengate",
                "erp.ORDER_LINES",
                107,
                "ERP.ORDER_LINES",
                'key column ORDER_ID is not a bigint: "1010.5"',
            ),
            ("opencdc", "conduit.inventory.products", 100, "products", "no op field"),
            (
                "opencdc",
                "conduit.inventory.products",
                103,
                "products",
                "number 12.345678901234567890123 cannot be kept exactly: "
                "Spark reads it as 12.345678901234567",
            ),
            (
                "opencdc",
                "conduit.inventory.products",
                104,
                "products",
                "field named twice inside the payload (base64)",
            ),
            (
                "opencdc",
                "conduit.inventory.products",
                102,
                "products",
                'key column id is not a bigint: "seven"',
            ),
            (
                "pr_update",
                "gt.fd-test.DEV.inventory.pr_orders.pr-update",
                0,
                "pr_orders",
                "entity not declared in config: pr_orders",
            ),
            (
                "pr_update",
                "test-tenant.PROD.food-delivery.pr_registry.pr-update",
                100,
                "pr_registry",
                "unknown op code: REPLACE",
            ),
            (
                "pr_update",
                "test-tenant.PROD.food-delivery.pr_registry.pr-update",
                101,
                "pr_registry",
                'key column ID_USER is a JSON object, not a string: {"oid":"u10"}',
            ),
            (
                "tigergraph",
                "tigergraph.social.cdc",
                100,
                "Person",
                "mid does not have 4 or 5 numeric parts: 1|1701548849000|1",
            ),
            ("tigergraph", "tigergraph.social.cdc", 101, "Person", "key columns missing: uid"),
            (
                "tigergraph",
                "tigergraph.social.cdc",
                102,
                "Planet",
                "entity not declared in config: Planet",
            ),
            (
                "tigergraph",
                "tigergraph.social.cdc",
                104,
                "Person",
                "unknown op code: vertex upsert",
            ),
            (
                "tigergraph",
                "tigergraph.social.cdc",
                105,
                "Person",
                'key column uid is a JSON object, not a string: {"id":"person1"}',
            ),
            (
                "tigergraph",
                "tigergraph.social.cdc",
                107,
                "WorksAt",
                'key column from_uid is a JSON array, not a string: ["person1","person2"]',
            ),
        ]
    )


def test_the_silver_gate_accounts_for_every_bronze_record(spark, lake):
    """The gate's reconciliation on the real tables: the skipped Debezium message events
    count as skipped, the tombstones as noops, nothing is unaccounted."""
    sources = spark.createDataFrame([(name,) for name in EDGE_CASES], "source string")
    frame = silver_reconciliation(
        sources,
        spark.table("bronze.cdc_raw"),
        spark.table("silver.change_log"),
        spark.table("silver.change_log_rejects"),
    )
    columns = ["changes", "redelivered", "rejected", "noops", "skipped", "unaccounted"]
    counts = {r["source"]: tuple(r[c] for c in columns) for r in frame.collect()}
    assert counts == {
        "shop_debezium": (7, 0, 3, 1, 2, 0),
        "crm_db2": (5, 0, 4, 0, 0, 0),
        "erp_goldengate": (8, 0, 6, 0, 0, 0),
        "inventory_opencdc": (6, 0, 4, 0, 0, 0),
        "social_tigergraph": (14, 0, 6, 0, 0, 0),
        "contacts_entity_patches": (8, 0, 7, 0, 0, 0),
        "fastdata_pr_update": (8, 0, 3, 0, 0, 0),
        "inventory_cassandra": (1, 0, 3, 0, 0, 0),
    }


def test_dbt_data_and_unit_tests_pass_on_the_log(settings, lake):
    result = run_dbt(settings, ["test", *PIPELINE])
    unit_tests = {
        "tigergraph_mid_parts_order_the_changes",
        "opencdc_base64_fields_are_decoded",
        "one_string_keys_split_by_the_declared_key_columns",
        "key_values_must_be_scalar_and_cast_to_the_declared_type",
    }
    assert unit_tests <= set(result.statuses)
    assert "unique_change_log_change_id" in result.statuses
    assert set(result.statuses.values()) == {"pass"}


CONSTRAINTS = {
    "change_log_change_id_not_null": "cast(null as string) as change_id",
    "change_log_record_key_not_null": "cast(null as string) as record_key",
    "change_log_seq_not_null": "cast(null as array<bigint>) as seq",
    "change_log_op_in_vocabulary": "'upsert_maybe' as op",
}


def _constraints(spark: SparkSession) -> set[str]:
    properties = spark.sql("show tblproperties silver.change_log").collect()
    prefix = "delta.constraints."
    return {r.key.removeprefix(prefix) for r in properties if r.key.startswith(prefix)}


def test_the_first_build_writes_the_constraints_in_the_create_commit(spark, lake):
    # dbt-spark added each one with its own `alter table` after the create: four commits
    # and four reads of the log on every new lake (macros/check_constraints_at_create.sql).
    history = spark.sql("describe history silver.change_log").orderBy("version").collect()
    assert "ADD CONSTRAINT" not in {r.operation for r in history}
    assert history[0].operation.endswith("TABLE AS SELECT")
    assert _constraints(spark) == set(CONSTRAINTS)


@pytest.mark.parametrize("constraint", sorted(CONSTRAINTS))
def test_the_log_refuses_a_row_that_breaks_a_constraint_and_appends_nothing(
    spark, lake, constraint
):
    # The constraints replace the not_null / accepted_values data tests: a bad row never
    # lands, where a test found it only after the append.
    broken = CONSTRAINTS[constraint]
    column = broken.rsplit(" as ", 1)[1]
    columns = ", ".join(
        broken if c == column else c for c in spark.table("silver.change_log").columns
    )
    version = latest_version(spark, "silver.change_log")
    with pytest.raises(Exception, match=constraint):
        spark.sql(f"insert into silver.change_log select {columns} from silver.change_log limit 1")
    assert latest_version(spark, "silver.change_log") == version


def test_dbt_docs_generate_documents_the_log(settings, lake):
    run_dbt(settings, ["docs", "generate"])
    catalog = json.loads((settings.lake_root / "dbt" / "target" / "catalog.json").read_text())
    columns = catalog["nodes"]["model.cdc_lakehouse.change_log"]["columns"]
    assert list(columns) == [
        "change_id",
        "source",
        "format",
        "entity",
        "entity_kind",
        "table_name",
        "record_key",
        "op",
        "seq",
        "event_ts",
        "row_image",
        "changes",
        "position",
        "lineage",
    ]


@pytest.fixture(scope="module")
def redelivered(spark: SparkSession, settings: Settings, lake: dict[str, Any]) -> dict[str, Any]:
    """Run 2: every sample redelivered under new offsets, one new change; a log row removed,
    and two of the log's constraints dropped.

    The removed row's bronze record is old: an incremental run must not read it again.
    The log without two constraints is a lake built before they were declared.
    """
    spark.sql("delete from silver.change_log where format = 'db2' and lineage.offset = 4")
    spark.sql("alter table silver.change_log drop constraint change_log_op_in_vocabulary")
    spark.sql("alter table silver.change_log drop constraint change_log_seq_not_null")
    for name, fmt in SAMPLE_FORMATS.items():
        # DB2 and pr-update v2 have no position of their own in the Kafka value: there a
        # redelivery is a new change (docs/formats.md).
        again = [
            {**r, "offset": r["offset"] + 1000}
            for r in sample_records(fmt)
            if fmt != "db2" and not r["topic"].endswith("pr_customers.pr-update")
        ]
        write_lines(lake["landings"][name] / "redelivered.jsonl", again)
    write_lines(
        lake["landings"]["erp_goldengate"] / "new.jsonl",
        [
            record(
                "erp.ORDER_LINES",
                2000,
                "1001_SKU_42",
                {
                    "table": "ERP.ORDER_LINES",
                    "op_type": "U",
                    "pos": 106,
                    "before": None,
                    "after": {"ORDER_ID": 1001, "LINE_CODE": "SKU_42", "QTY": 4, "PRICE": 9.5},
                },
            )
        ],
    )
    silver(spark, settings, lake["config"])
    return {"log": whole_log(spark)}


def _without_db2_offset_4(log: set[tuple]) -> set[tuple]:
    return {r for r in log if not (r[1] == "crm.DB2INST1.USERS" and r[8] == 4)}


def test_redelivery_adds_only_the_new_change_and_reads_only_new_bronze(spark, lake, redelivered):
    before = _without_db2_offset_4(lake["log"])
    assert len(before) == len(lake["log"]) - 1
    added = redelivered["log"] - before
    assert before <= redelivered["log"]
    assert [(r[1], r[2], r[3], r[4], r[5], r[6], r[8]) for r in added] == [
        (
            "ERP.ORDER_LINES",
            "upsert",
            '{"ORDER_ID":"1001","LINE_CODE":"SKU_42"}',
            (106,),
            "goldengate:106",
            '{"ORDER_ID":1001,"LINE_CODE":"SKU_42","QTY":4,"PRICE":9.5}',
            2000,
        ),
    ]


def test_a_log_without_its_constraints_gets_them_back_at_the_next_build(spark, redelivered):
    # dbt-spark adds a model's constraints only when it creates the table; the change
    # log's post-hook adds the ones it lacks (Delta checks the rows it holds as it does).
    assert _constraints(spark) == set(CONSTRAINTS)


def test_full_refresh_rebuilds_the_same_log(spark, settings, lake, redelivered):
    publish_entities(spark, lake["config"])
    run_dbt(settings, ["run", *PIPELINE, "--full-refresh"])
    rebuilt = whole_log(spark)
    new_change = redelivered["log"] - _without_db2_offset_4(lake["log"])
    assert rebuilt == lake["log"] | new_change
