"""The silver step: publish the declared entities, then dbt, when there is something to do.

A dbt run costs seconds even when bronze holds nothing new (parsing, the staging views
recreated, each incremental model's queries), so a pipeline cycle that brought nothing
would pay it for nothing. The declared entities are published only when they changed
(``entity_registry``), and each successful build is recorded in ``lakehouse.silver_builds``
with the bronze version it read and a fingerprint of the dbt project's files:

- same bronze version and fingerprint as the last build, same entities: nothing to do;
- same fingerprint, newer bronze (or new entities): only the incremental models run (the
  staging and intermediate views are defined by the same SQL and read the entities at
  query time, so they are still current);
- anything else (first build, a changed model or macro, ``--full-refresh``): the whole
  project runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.bronze.tables import RAW_TABLE
from pyspark_jobs.config import LakehouseConfig
from pyspark_jobs.gold.change_feed import latest_version
from pyspark_jobs.settings import PROJECT_ROOT, Settings
from pyspark_jobs.silver.dbt_runner import run_dbt
from pyspark_jobs.silver.entity_registry import publish_entities

BUILDS_TABLE = "lakehouse.silver_builds"
SILVER_TABLES = ("silver.change_log", "silver.change_log_rejects")
# What dbt builds from: a change to any of these may change what silver holds.
_PROJECT_FILES = ("dbt_project.yml", "profiles.yml", "models", "macros")


@dataclass(frozen=True)
class SilverBuild:
    """What a silver step did: ``full`` (every model), ``incremental`` (the incremental
    models only) or ``skipped`` (nothing new), and the bronze version it read."""

    kind: str
    bronze_version: int


def project_fingerprint(root: Path = PROJECT_ROOT) -> str:
    """A hash of the dbt project's files."""
    digest = hashlib.sha256()
    for name in _PROJECT_FILES:
        path = root / name
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            digest.update(str(file.relative_to(root)).encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def _ensure_builds_table(spark: SparkSession) -> None:
    spark.sql("create database if not exists lakehouse")
    spark.sql(
        f"""
        create table if not exists {BUILDS_TABLE} (
            bronze_version bigint not null comment 'bronze.cdc_raw version the build read',
            fingerprint string not null comment 'the dbt project files',
            kind string not null comment 'full or incremental',
            built_at timestamp not null
        ) using delta
        comment 'Successful silver builds: a cycle with nothing new skips dbt'
        """
    )


def _last_build(spark: SparkSession) -> tuple[int, str] | None:
    # One row: the newest build.
    row = (
        spark.table(BUILDS_TABLE)
        .orderBy(F.col("built_at").desc())
        .select("bronze_version", "fingerprint")
        .first()
    )
    return None if row is None else (int(row["bronze_version"]), str(row["fingerprint"]))


def build_silver(
    spark: SparkSession,
    settings: Settings,
    config: LakehouseConfig,
    full_refresh: bool = False,
    log: Callable[[str], None] = print,
    dbt_vars: Mapping[str, Any] | None = None,
) -> SilverBuild:
    """Bring silver up to date with bronze: the whole dbt project, its incremental models
    only, or nothing, as above. ``dbt_vars`` are passed to dbt (the replay of rejects,
    ``silver/replay.py``): a build with vars always runs. Raises ``DbtFailed`` when dbt
    fails (nothing recorded)."""
    _ensure_builds_table(spark)
    bronze = latest_version(spark, RAW_TABLE) if spark.catalog.tableExists(RAW_TABLE) else -1
    fingerprint = project_fingerprint()
    new_entities = publish_entities(spark, config)
    last = None if full_refresh else _last_build(spark)
    built = all(spark.catalog.tableExists(t) for t in SILVER_TABLES)
    if last == (bronze, fingerprint) and built and not new_entities and not dbt_vars:
        log(f"silver: nothing new since the last build (bronze version {bronze})")
        return SilverBuild("skipped", bronze)
    variables = ["--vars", json.dumps(dict(dbt_vars))] if dbt_vars else []
    if last is not None and last[1] == fingerprint and built:
        kind = "incremental"
        run_dbt(settings, ["run", "--select", "config.materialized:incremental", *variables])
    else:
        kind = "full"
        run_dbt(settings, ["run", *(["--full-refresh"] if full_refresh else []), *variables])
    spark.createDataFrame(
        [(bronze, fingerprint, kind)], "bronze_version bigint, fingerprint string, kind string"
    ).withColumn("built_at", F.current_timestamp()).write.format("delta").mode(
        "append"
    ).saveAsTable(BUILDS_TABLE)
    return SilverBuild(kind, bronze)
