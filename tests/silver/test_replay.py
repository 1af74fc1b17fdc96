"""`lakehouse replay-rejects` (pyspark_jobs/silver/replay.py): after an entity is declared,
its rejected records land in the change log exactly once, a redelivery among them too;
a record the fix does not make valid stays rejected; a second replay lands nothing; the
next gold run applies what landed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

from pyspark_jobs.bronze.ingest import ingest
from pyspark_jobs.config import ConfigError, load_config
from pyspark_jobs.gold.apply import apply_gold
from pyspark_jobs.settings import Settings
from pyspark_jobs.silver.build import build_silver
from pyspark_jobs.silver.replay import ReplayReport, replay_rejects
from tests.silver.landing import copy_sample, record, write_config, write_lines

QUIET = {"log": lambda _: None}
TOPIC = "shop.public.orders"


def order(op: str, order_id: object, lsn: int, **after: object) -> dict:
    """A Debezium event of the table shop.orders (not declared until the test declares it)."""
    return {
        "op": op,
        "before": None,
        "after": {"ORDER_ID": order_id, **after},
        "source": {"db": "shop", "schema": "public", "table": "orders",
                   "ts_ms": 1700000100000 + lsn, "lsn": lsn},
        "ts_ms": 1700000100001 + lsn,
    }  # fmt: skip


CREATED = order("c", 1, 5001, ITEM="pen", QTY=2)
ORDERS = [
    record(TOPIC, 0, {"ORDER_ID": 1}, CREATED),
    record(TOPIC, 1, {"ORDER_ID": 1}, order("u", 1, 5002, ITEM="pen", QTY=3)),
    record(TOPIC, 2, {"ORDER_ID": 1}, CREATED),  # redelivered under a new offset
    record(TOPIC, 3, {"ORDER_ID": "x-9"}, order("c", "x-9", 5003, ITEM="ink", QTY=1)),
]
ORDERS_ENTITY = {
    "name": "shop.orders",
    "table": "orders",
    "key": ["ORDER_ID"],
    "columns": {"ORDER_ID": "bigint", "ITEM": "string", "QTY": "bigint"},
}


def _declare_orders(path: Path) -> None:
    raw = yaml.safe_load(path.read_text())
    raw["sources"][0]["entities"].append(ORDERS_ENTITY)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))


def _rows(spark: SparkSession, table: str) -> list[str]:
    return sorted(str(r) for r in spark.table(table).collect())


def _orders_in_log(spark: SparkSession) -> list[tuple]:
    return sorted(
        (r["record_key"], r["op"], r["row_image"], r["lineage"]["offset"])
        for r in spark.table("silver.change_log").where("entity = 'shop.orders'").collect()
    )


def test_replayed_rejects_land_once_and_gold_applies_them(
    spark: SparkSession, empty_lake: Settings, tmp_path: Path
):
    landing = tmp_path / "landing"
    copy_sample("debezium", landing)
    write_lines(landing / "orders.jsonl", ORDERS)
    path = write_config(tmp_path / "sources.yml", {"shop_debezium": landing})
    ingest(spark, empty_lake, load_config(path), **QUIET)
    build_silver(spark, empty_lake, load_config(path), **QUIET)
    apply_gold(spark, load_config(path), **QUIET)
    log_before = spark.table("silver.change_log").collect()
    assert sorted(
        r["reject_reason"] for r in spark.table("silver.change_log_rejects").collect()
    ) == (["entity not declared in config: shop.orders"] * 4)

    _declare_orders(path)
    config = load_config(path)
    with pytest.raises(ConfigError, match="no source named 'nope'"):
        replay_rejects(spark, empty_lake, config, ["nope"], **QUIET)
    first = replay_rejects(spark, empty_lake, config, **QUIET)

    # The create (first delivery, offset 0; the redelivery at offset 2 is the same change)
    # and the update landed; the log is otherwise as it was.
    assert first == ReplayReport(replayed=4, landed=2, resolved=3)
    assert _orders_in_log(spark) == [
        ('{"ORDER_ID":"1"}', "upsert", '{"ORDER_ID":1,"ITEM":"pen","QTY":2}', 0),
        ('{"ORDER_ID":"1"}', "upsert", '{"ORDER_ID":1,"ITEM":"pen","QTY":3}', 1),
    ]
    log_after = spark.table("silver.change_log")
    assert sorted(map(str, log_after.where("entity != 'shop.orders'").collect())) == sorted(
        map(str, log_before)
    )
    rejects = spark.table("silver.change_log_rejects").collect()
    assert [(r["lineage"]["offset"], r["reject_reason"]) for r in rejects] == [
        (3, 'key column ORDER_ID is not a bigint: "x-9"')
    ]

    log_once, rejects_once = (
        _rows(spark, "silver.change_log"),
        _rows(spark, "silver.change_log_rejects"),
    )
    again = replay_rejects(spark, empty_lake, config, ["shop_debezium"], **QUIET)
    assert again == ReplayReport(replayed=1, landed=0, resolved=0)
    assert _rows(spark, "silver.change_log") == log_once
    assert _rows(spark, "silver.change_log_rejects") == rejects_once

    apply_gold(spark, config, **QUIET)
    assert [
        tuple(r) for r in spark.table("gold.orders").select("ORDER_ID", "ITEM", "QTY").collect()
    ] == [(1, "pen", 3)]
