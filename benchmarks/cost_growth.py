"""Part: what a small batch costs as the tables grow. A base of ``keys`` keys per source
is landed and applied; then a batch touching 1 % of those keys is landed and applied, and
that second run is timed. The bench runs this at B and at 4B keys: a run whose cost
follows the changes costs the same at both.

Params: ``lake``, ``config`` (landing folders under ``landing``), ``landing``, ``keys``,
``seed``, ``batch_share`` (default 0.01), ``events_per_key`` (base events per key).
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from benchmarks.child import Params, run_part
from benchmarks.generate import Workload
from benchmarks.ours import timed_run
from benchmarks.rss import RssSampler
from pyspark_jobs.settings import Settings


def measure(
    spark: SparkSession, settings: Settings, params: Params, sampler: RssSampler
) -> dict[str, Any]:
    keys, landing = int(params["keys"]), Path(params["landing"])
    workload = Workload(keys, seed=int(params["seed"]))
    base_records = sum(
        workload.write(landing, int(params["events_per_key"]) * keys, files_per_source=4).values()
    )
    base = timed_run(spark, settings, sampler)
    touched = random.Random(int(params["seed"])).sample(
        range(keys), max(1, round(keys * float(params.get("batch_share", 0.01))))
    )
    # About two changes per touched key and source.
    batch_records = sum(workload.write(landing, 6 * len(touched), keys=touched).values())
    started = time.time()
    batch = timed_run(spark, settings, sampler)
    return {
        "keys": keys,
        "base_records": base_records,
        "base": base,
        "touched_keys": len(touched),
        "batch_records": batch_records,
        "batch": batch,
        "batch_seconds": time.time() - started,
    }


if __name__ == "__main__":
    run_part(measure)
