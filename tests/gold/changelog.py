"""Hand-built change-log rows, appended to a silver.change_log created by the test."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from pyspark_jobs.config import Entity, LakehouseConfig, Source

CHANGE_LOG_SCHEMA = (
    "change_id string, source string, format string, entity string, entity_kind string, "
    "table_name string, record_key string, op string, seq array<bigint>, event_ts timestamp, "
    "row_image string, changes map<string, struct<op: string, value: string, ts: bigint>>, "
    "position string, lineage struct<topic: string, `offset`: bigint>"
)


def record_key(key: Mapping[str, Any]) -> str:
    """The canonical record key silver writes: to_json(map(column -> value text))."""
    return json.dumps({k: str(v) for k, v in key.items()}, separators=(",", ":"))


def change(
    source: Source,
    entity: Entity,
    key: Mapping[str, Any],
    op: str,
    seq: list[int],
    row: Mapping[str, Any] | None = None,
    changes: Mapping[str, tuple[str, str | None, int | None]] | None = None,
) -> tuple:
    """One change-log row; its change_id is derived from what identifies the change."""
    rk = record_key(key)
    position = "|".join(str(s) for s in seq)
    change_id = hashlib.sha256(
        f"{source.name}|{entity.name}|{rk}|{op}|{position}".encode()
    ).hexdigest()
    image = None if row is None else json.dumps(row, separators=(",", ":"))
    cells = (
        None
        if changes is None
        else {c: {"op": o, "value": v, "ts": t} for c, (o, v, t) in changes.items()}
    )
    event_ts = datetime.fromtimestamp(
        seq[0] / 1000 if seq[0] < 10**12 * 10 else seq[0] / 10**6, tz=timezone.utc
    ).replace(tzinfo=None)
    return (
        change_id,
        source.name,
        source.format,
        entity.name,
        entity.kind,
        entity.table,
        rk,
        op,
        seq,
        event_ts,
        image,
        cells,
        position,
        {"topic": "t", "offset": 0},
    )


def create_change_log(spark: SparkSession) -> None:
    spark.sql("create database if not exists silver")
    spark.sql(
        f"create table silver.change_log ({CHANGE_LOG_SCHEMA}) using delta "
        "tblproperties (delta.enableChangeDataFeed = true)"
    )


def append(spark: SparkSession, rows: Iterable[tuple], dedupe: bool = True) -> None:
    """Append rows as one change-log commit, skipping change_ids already logged (as silver
    does; ``dedupe=False`` lets a redelivered duplicate through, to test gold's defence)."""
    frame: DataFrame = spark.createDataFrame(list(rows), CHANGE_LOG_SCHEMA)
    if dedupe:
        frame = frame.dropDuplicates(["change_id"]).join(
            spark.table("silver.change_log").select("change_id"), "change_id", "left_anti"
        )
    frame.select(*spark.table("silver.change_log").columns).write.format("delta").mode(
        "append"
    ).saveAsTable("silver.change_log")


def config(*sources: Source, retention_days: int = 30) -> LakehouseConfig:
    return LakehouseConfig(
        path=Path("test.yml"), sources=sources, tombstone_retention_days=retention_days
    )


def rows(spark: SparkSession, table: str, columns: list[str]) -> list[tuple]:
    """A table's rows as sorted tuples of ``columns`` (None sorts first)."""
    return sorted(
        (tuple(r) for r in spark.table(table).select(*columns).collect()),
        key=lambda r: tuple((v is not None, str(v)) for v in r),
    )
