"""Helpers the quality tests share: run the pipeline or a CLI command and keep the output."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession

from pyspark_jobs.cli import main
from pyspark_jobs.config import LakehouseConfig
from pyspark_jobs.pipeline import run_pipeline
from pyspark_jobs.settings import Settings


def run_logged(spark: SparkSession, settings: Settings, config: LakehouseConfig) -> tuple[int, str]:
    """``lakehouse run`` in the shared session: exit code and everything it logged."""
    lines: list[str] = []
    code = run_pipeline(spark, settings, config, log=lines.append)
    return code, "\n".join(lines)


def cli(settings: Settings, config_path: Path, *args: str) -> int:
    """The real CLI entry point on the test lake (it reuses the running Spark session)."""
    return main(["--lake-root", str(settings.lake_root), "--config", str(config_path), *args])


def latest_run(settings: Settings) -> dict:
    runs = sorted((settings.state_dir / "runs").glob("*.json"))
    return json.loads(runs[-1].read_text())


def report_text(settings: Settings) -> str:
    return (settings.reports_dir / "index.html").read_text()
