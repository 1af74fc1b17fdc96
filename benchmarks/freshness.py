"""Freshness in continuous mode: ``lakehouse run --every`` cycles while a producer thread
lands files at a sustained rate; how long from a change landing to it being visible in
gold (p50 / p95).

A change's landing time is its event time: the producer stamps every change of a file
with the wall clock at which it writes the file (and, to measure freshness alone, sends
nothing out of order or twice). It is visible once the gold commit that wrote it exists:
Delta's change data feed of each gold table gives, for every row a cycle wrote, that
commit's timestamp beside the row's ``_event_ts`` (the newest change it reflects). Changes
superseded within a cycle never become visible on their own and are not counted.

The statistics are a part of their own (``python -m benchmarks.freshness``), run once the
continuous run has stopped and released the lake.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks.child import Params, run_part, start_part
from benchmarks.continuous import continuous_run, cycle_end, cycle_seconds
from benchmarks.generate import Workload, write_bench_config
from benchmarks.rss import RssSampler
from pyspark_jobs.settings import Settings

VISIBLE = ("insert", "update_postimage")


def measure_freshness(
    folder: str,
    keys: int,
    seed: int,
    rate: float,
    duration: float,
    every: float,
    timeout: float = 3600,
) -> dict[str, Any]:
    """Run the continuous mode with a producer at ``rate`` events/s for ``duration`` s."""
    work = Path(folder)
    landing, lake = work / "landing", work / "lake"
    config = write_bench_config(work, landing)
    workload = Workload(keys, seed=seed, out_of_order=0.0, redelivered=0.0)
    # A first file, so the first (cold) cycle creates every table before the measurement.
    workload.write(landing, max(100, round(rate)), now_ms=int(time.time() * 1000))
    produced: list[int] = []
    with (
        continuous_run(lake, config, every, work / "lakehouse.log", timeout) as output,
        RssSampler(output.proc.pid) as sampler,
    ):
        output.wait_for(cycle_end, 0.0, timeout)
        started = time.time()

        def produce() -> None:
            tick = 0
            while tick < duration:
                time.sleep(max(0.0, started + tick - time.time()))
                now_ms = int(time.time() * 1000)
                produced.append(sum(workload.write(landing, round(rate), now_ms=now_ms).values()))
                tick += 1

        producer = threading.Thread(target=produce, name="producer")
        producer.start()
        producer.join()
        last_landed = time.time()
        # The first cycle that starts after the last file landed applies it.
        output.wait_for(lambda line: line.endswith(": started"), last_landed, timeout)
        output.wait_for(cycle_end, last_landed, timeout)
    cycles = [cycle_seconds(line) for at, line in output.lines if cycle_end(line) and at > started]
    stats = start_part(
        "benchmarks.freshness",
        {
            "lake": str(work / "stats-lake"),
            "gold": str(lake / "warehouse" / "gold.db"),
            "since_ms": int(started * 1000),
        },
        work / "stats",
    )
    return {
        "rate": rate,
        "duration": duration,
        "events": sum(produced),
        # One file per source a second: n files cover n seconds, more if the writes lagged.
        "achieved_rate": sum(produced) / max(last_landed - started, float(len(produced))),
        "cycles": len(cycles),
        "cycle_seconds_mean": sum(cycles) / len(cycles) if cycles else None,
        "failed_cycles": sum(
            1 for at, line in output.lines if at > started and "stopped by a gate" in line
        ),
        "peak_rss_bytes": sampler.peak(started),
        **stats["latency"],
    }


def visible_latencies(spark: SparkSession, table_path: str, since_ms: int) -> DataFrame:
    """Seconds from ``_event_ts`` to the commit that made each row visible, for the rows a
    commit wrote (not deleted) whose newest change is from ``since_ms`` on."""
    micros = F.unix_micros(F.col("_commit_timestamp")) - F.unix_micros(F.col("_event_ts"))
    return (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .load(table_path)
        .where(F.col("_change_type").isin(*VISIBLE))
        .where(F.unix_millis(F.col("_event_ts")) >= since_ms)
        .select((micros / 1e6).alias("seconds"))
    )


def measure(
    spark: SparkSession, settings: Settings, params: Params, sampler: RssSampler
) -> dict[str, Any]:
    tables = sorted(str(p) for p in Path(params["gold"]).iterdir() if (p / "_delta_log").is_dir())
    latencies = [visible_latencies(spark, t, int(params["since_ms"])) for t in tables]
    union = latencies[0]
    for more in latencies[1:]:
        union = union.unionByName(more)
    row = union.agg(
        F.count("*").alias("n"),
        F.percentile("seconds", 0.5).alias("p50"),
        F.percentile("seconds", 0.95).alias("p95"),
        F.max("seconds").alias("max"),
    ).first()
    assert row is not None
    return {
        "latency": {
            "visible_rows": row["n"],
            "p50_seconds": row["p50"],
            "p95_seconds": row["p95"],
            "max_seconds": row["max"],
        }
    }


if __name__ == "__main__":
    run_part(measure)
