"""Part: ``lakehouse run`` (bronze, silver, gold, each behind its gate) on the landing files,
with each layer's wall time and driver peak RSS.

Params: ``lake``, ``config`` (the sources file naming the landing folders).
"""

from __future__ import annotations

import json
import time
from typing import Any

from pyspark.sql import SparkSession

from benchmarks.child import Params, run_part
from benchmarks.rss import RssSampler
from pyspark_jobs.config import load_config
from pyspark_jobs.pipeline import EXIT_OK, run_pipeline
from pyspark_jobs.quality.gate_steps import DOCS_STEP
from pyspark_jobs.settings import Settings

# The steps of a run in the order run_pipeline takes them (its summary keeps their
# seconds, not their order).
STEPS = ("bronze", "bronze gate", "silver", "silver gate", "gold", "gold gate")
LAYERS = {
    "bronze": ("bronze",),
    "silver": ("silver",),
    "gold": ("gold",),
    "gates": ("bronze gate", "silver gate", "gold gate", DOCS_STEP),
}


def timed_run(spark: SparkSession, settings: Settings, sampler: RssSampler) -> dict[str, Any]:
    """One ``run_pipeline``: its outcome, total seconds, and per layer seconds and peak RSS
    (the RSS samples taken while the layer's steps ran)."""
    config = load_config(settings.config_path)
    before = set((settings.state_dir / "runs").glob("*.json"))
    started = time.time()
    code = run_pipeline(spark, settings, config, log=lambda _: None)
    total = time.time() - started
    (path,) = set((settings.state_dir / "runs").glob("*.json")) - before
    summary = json.loads(path.read_text())
    windows: dict[str, tuple[float, float]] = {}
    at = summary["started_at"]
    for step in STEPS:
        if step in summary["timings"]:
            windows[step] = (at, at + summary["timings"][step])
            at = windows[step][1]
    layers = {
        layer: {
            "seconds": sum(windows[s][1] - windows[s][0] for s in steps if s in windows),
            "peak_rss_bytes": max(
                (sampler.peak(*windows[s]) for s in steps if s in windows), default=0
            ),
        }
        for layer, steps in LAYERS.items()
    }
    return {
        "succeeded": code == EXIT_OK,
        "status": summary["status"],
        "seconds": total,
        "layers": layers,
        "gold_rows": summary["layers"].get("gold", {}).get("rows", {}),
        "gold_freshness": summary["layers"].get("gold", {}).get("freshness", {}),
    }


def measure(
    spark: SparkSession, settings: Settings, params: Params, sampler: RssSampler
) -> dict[str, Any]:
    return timed_run(spark, settings, sampler)


if __name__ == "__main__":
    run_part(measure)
