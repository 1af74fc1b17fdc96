"""Part: the copy floor. One session reads every landing file once and writes it once to a
Delta table: the least any pipeline that lands these files in Delta can cost.

Params: ``lake``, ``landing`` (the folder holding every source's landing folder).
"""

from __future__ import annotations

import time
from typing import Any

from pyspark.sql import SparkSession

from benchmarks.child import Params, run_part
from benchmarks.rss import RssSampler
from pyspark_jobs.settings import Settings


def measure(
    spark: SparkSession, settings: Settings, params: Params, sampler: RssSampler
) -> dict[str, Any]:
    started = time.time()
    spark.sql("create database if not exists floor")
    (
        spark.read.option("recursiveFileLookup", "true")
        .option("pathGlobFilter", "*.jsonl")
        .text(params["landing"])
        .write.format("delta")
        .mode("overwrite")
        .saveAsTable("floor.landing_copy")
    )
    seconds = time.time() - started
    # Delta's own count of what the write committed: no second pass over the data.
    metrics = spark.sql("describe history floor.landing_copy limit 1").first()
    assert metrics is not None
    rows = int(metrics["operationMetrics"]["numOutputRows"])
    return {"seconds": seconds, "rows": rows}


if __name__ == "__main__":
    run_part(measure)
