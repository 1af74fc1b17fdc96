"""Schema drift through the whole pipeline: a Debezium source adds, drops and retypes columns.

Two `run_pipeline` runs on one lake (a module-scoped fixture): the first lands eight users
in the source's first schema, the second their changes after the source's schema changed.
The behaviour, as docs/reliability.md states it:

- an added column is in gold when config declares it, else only in silver's row image
  (``silver.change_log.row_image`` keeps the whole after-image);
- a dropped column: a full-row change no longer carries it, so the row it sets holds NULL
  there (the row as the source now has it); rows not changed since keep their value;
- a changed type: a value that casts exactly is applied; one that does not, or casts only by
  losing part of it (rounded decimals, a date given a time, a double out of range), is a
  gold reject with the value quoted, never merged, and the key keeps its last good state.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.config import load_config
from pyspark_jobs.pipeline import run_pipeline
from pyspark_jobs.settings import Settings
from tests.conftest import reset_lake

pytestmark = pytest.mark.slow

TOPIC = "shop.public.users"
COLUMNS = {
    "USER_ID": "bigint",
    "NAME": "string",
    "COINS": "bigint",
    "BALANCE": "decimal(10,2)",
    "BORN": "date",
    "SCORE": "double",
    "EMAIL": "string",  # declared before the source has it
}


def raw_config(landing: Path, columns: dict[str, str]) -> dict[str, Any]:
    entity = {"name": "shop.users", "table": "users", "key": ["USER_ID"], "columns": columns}
    source = {"name": "drift", "format": "debezium", "landing": str(landing), "entities": [entity]}
    return {"sources": [source]}


def line(lsn: int, after: dict[str, Any]) -> str:
    """A landing line of a Debezium update event."""
    value = {
        "before": None,
        "after": after,
        "source": {"db": "shop", "table": "users", "ts_ms": 1700000000000 + lsn, "lsn": lsn},
        "op": "u",
        "ts_ms": 1700000000000 + lsn,
    }
    record = {
        "topic": TOPIC,
        "partition": 0,
        "offset": lsn,
        "timestamp": 1700000000000 + lsn,
        "key": {"USER_ID": after["USER_ID"]},
        "value": value,
    }
    return json.dumps(record, separators=(",", ":"))


def first_schema(user: int) -> dict[str, Any]:
    """A row of the source's first schema (LEGACY: never declared)."""
    return {
        "USER_ID": user,
        "NAME": f"u{user}",
        "COINS": user * 10,
        "BALANCE": 1.5,
        "BORN": "2000-01-01",
        "SCORE": 0.5,
        "LEGACY": "x",
    }


def second_schema(user: int, **changed: Any) -> dict[str, Any]:
    """A row after the source's change: LEGACY dropped, EMAIL and NICK added."""
    row = {**first_schema(user), "NAME": f"u{user} v2", "EMAIL": f"{user}@x", "NICK": f"n{user}"}
    del row["LEGACY"]
    return {**row, **changed}


def second_lines() -> list[str]:
    no_coins = second_schema(2)
    del no_coins["COINS"]
    return [
        line(101, second_schema(1)),  # added (declared EMAIL, undeclared NICK), dropped LEGACY
        line(102, no_coins),  # COINS dropped at the source
        line(103, second_schema(3, COINS=12.5)),  # COINS bigint -> decimal
        line(104, second_schema(4, COINS="forty")),  # COINS bigint -> text
        line(105, second_schema(5, BALANCE=12.345)),  # BALANCE scale 2 -> 3
        line(106, second_schema(6, BORN="2024-01-01T10:00:00")),  # BORN date -> timestamp
        line(107, second_schema(7, SCORE="1e400")),  # SCORE double -> text, beyond a double
        line(108, second_schema(8, COINS="17")),  # COINS bigint -> text, still a number
        line(109, second_schema(9)),  # a new key in the new schema
    ]


@dataclass
class Drift:
    codes: tuple[int, int]
    settings: Settings
    landing: Path
    config_path: Path


@pytest.fixture(scope="module")
def drift(
    spark: SparkSession, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Drift]:
    folder = tmp_path_factory.mktemp("drift")
    landing = folder / "landing"
    landing.mkdir()
    config_path = folder / "sources.yml"
    config_path.write_text(yaml.safe_dump(raw_config(landing, COLUMNS), sort_keys=False))
    config = load_config(config_path)
    reset_lake(spark, settings)
    (landing / "1.jsonl").write_text("".join(line(u, first_schema(u)) + "\n" for u in range(1, 9)))
    first = run_pipeline(spark, settings, config, log=lambda _: None)
    (landing / "2.jsonl").write_text("".join(t + "\n" for t in second_lines()))
    second = run_pipeline(spark, settings, config, log=lambda _: None)
    yield Drift((first, second), settings, landing, config_path)


def gold_users(spark: SparkSession) -> list[tuple]:
    return sorted(tuple(r) for r in spark.table("gold.users").select(*COLUMNS).collect())


def v1(user: int) -> tuple:
    return (user, f"u{user}", user * 10, Decimal("1.50"), date(2000, 1, 1), 0.5, None)


def v2(user: int, coins: int | None = None) -> tuple:
    coins = user * 10 if coins is None else coins
    return (user, f"u{user} v2", coins, Decimal("1.50"), date(2000, 1, 1), 0.5, f"{user}@x")


def test_both_runs_pass_every_gate(drift: Drift):
    # A drifted value is a rejected state (reported), not a gate failure.
    assert drift.codes == (0, 0)


def test_gold_holds_the_declared_columns_only(spark: SparkSession, drift: Drift):
    declared = [c for c in spark.table("gold.users").columns if not c.startswith("_")]
    assert declared == list(COLUMNS)


def test_added_dropped_and_exactly_cast_values_reach_gold(spark: SparkSession, drift: Drift):
    assert gold_users(spark) == [
        v2(1),  # EMAIL (declared, added) filled
        (2, "u2 v2", None, Decimal("1.50"), date(2000, 1, 1), 0.5, "2@x"),  # COINS dropped
        v1(3),  # rejected drifts: each key keeps its last good state
        v1(4),
        v1(5),
        v1(6),
        v1(7),
        v2(8, coins=17),  # "17" casts to bigint exactly
        v2(9),
    ]


def test_retyped_values_are_rejects_quoting_the_value(spark: SparkSession, drift: Drift):
    rejects = spark.table("lakehouse.gold_rejects").select("table_name", "record_key", "reason")
    assert sorted(tuple(r) for r in rejects.collect()) == [
        ("users", '{"USER_ID":"3"}', 'column COINS is not a bigint: "12.5"'),
        ("users", '{"USER_ID":"4"}', 'column COINS is not a bigint: "forty"'),
        ("users", '{"USER_ID":"5"}', 'column BALANCE is not a decimal(10,2): "12.345"'),
        ("users", '{"USER_ID":"6"}', 'column BORN is not a date: "2024-01-01T10:00:00"'),
        ("users", '{"USER_ID":"7"}', 'column SCORE is not a double: "1e400"'),
    ]


def test_an_undeclared_column_stays_in_the_row_image(spark: SparkSession, drift: Drift):
    images = (
        spark.table("silver.change_log")
        .where(F.col("record_key") == '{"USER_ID":"1"}')
        .orderBy("seq")
        .select(F.from_json("row_image", "map<string, string>").alias("i"))
        .collect()
    )
    assert [(r.i.get("LEGACY"), r.i.get("NICK")) for r in images] == [("x", None), (None, "n1")]
