"""Helpers for bronze tests: configs and landing files written into tmp_path."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.config import LakehouseConfig, load_config


def write_config(folder: Path, sources: Sequence[dict[str, Any]]) -> Path:
    """Write ``folder/config/sources.yml``; each source gets a one-column entity."""
    entries = []
    for source in sources:
        entry = {"format": "debezium", **source}
        entry.setdefault(
            "entities",
            [{"name": f"db.{source['name']}", "table": f"t_{source['name']}",
              "key": ["id"], "columns": {"id": "bigint"}}],
        )  # fmt: skip
        entries.append(entry)
    path = folder / "config" / "sources.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"sources": entries}, sort_keys=False))
    return path


def landing_config(folder: Path, name: str = "files") -> tuple[LakehouseConfig, Path]:
    """A config with one landing source whose folder is ``folder/landing/<name>``."""
    landing = folder / "landing" / name
    landing.mkdir(parents=True, exist_ok=True)
    return load_config(write_config(folder, [{"name": name, "landing": str(landing)}])), landing


def record_line(topic: str, partition: int, offset: int, value: Any, key: Any = None) -> str:
    """One landing line as producers write it (value last)."""
    return json.dumps(
        {"topic": topic, "partition": partition, "offset": offset,
         "timestamp": 1700000000000 + offset, "key": key, "value": value},
        separators=(",", ":"),
    )  # fmt: skip


def bronze_rows(spark: SparkSession, source: str) -> list[tuple]:
    """(topic, partition, offset, key, value) of every bronze row of a source, sorted."""
    rows = (
        spark.table("bronze.cdc_raw")
        .where(F.col("source") == source)
        .select("topic", "partition", "offset", "key", "value")
        .collect()
    )
    return sorted((tuple(r) for r in rows), key=repr)


def quarantine_rows(spark: SparkSession, source: str) -> list[tuple]:
    """(reason, raw) of every quarantined line of a source, sorted."""
    rows = (
        spark.table("bronze.cdc_quarantine")
        .where(F.col("source") == source)
        .select("reason", "raw")
        .collect()
    )
    return sorted((tuple(r) for r in rows), key=repr)
