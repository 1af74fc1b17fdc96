"""``lakehouse run``: every layer in order in one Spark session, with its summary."""

from __future__ import annotations

import time
from collections.abc import Callable

from pyspark.sql import SparkSession

from pyspark_jobs.bronze.ingest import ingest
from pyspark_jobs.config import LakehouseConfig
from pyspark_jobs.gold.apply import apply_gold
from pyspark_jobs.run_summary import RunSummary, bronze_totals, format_summary, silver_totals
from pyspark_jobs.settings import Settings
from pyspark_jobs.silver.dbt_runner import run_dbt
from pyspark_jobs.silver.entity_registry import publish_entities


def run_pipeline(
    spark: SparkSession,
    settings: Settings,
    config: LakehouseConfig,
    log: Callable[[str], None] = print,
) -> int:
    """Run bronze -> silver -> gold; return the process exit code."""
    summary = RunSummary()
    runs_dir = settings.state_dir / "runs"
    status = "failed"
    try:
        started = time.time()
        ingest(spark, settings, config, log=log)
        summary.layers["bronze"] = bronze_totals(spark)
        summary.timings["bronze"] = time.time() - started

        started = time.time()
        publish_entities(spark, config)
        run_dbt(settings, ["run"])
        summary.layers["silver"] = silver_totals(spark)
        summary.timings["silver"] = time.time() - started

        started = time.time()
        tables = apply_gold(spark, config, log=log)
        summary.layers["gold"] = {
            "rows": {t.table: t.rows for t in tables},
            "applied": {t.table: t.changes for t in tables},
            "cast_errors": {t.table: t.cast_errors for t in tables},
        }
        summary.timings["gold"] = time.time() - started
        status = "succeeded"
    finally:
        summary.finish(status)
        path = summary.save(runs_dir)
        log(format_summary(summary))
        log(f"run summary: {path}")
    return 0
