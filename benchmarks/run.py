"""`make bench`: the pipeline measured on generated CDC data, beside what it is compared to.

In one run, on the same landing files and machine:

- ``lakehouse run`` on a mixed workload (Debezium, Cassandra, TigerGraph; some changes
  out of order, some redelivered): wall time, events/s and driver peak RSS per layer;
- the copy floor: read every landing file once, write it once to a Delta table;
- the Debezium part alone: ``lakehouse run``, the hand-written foreachBatch MERGE (its
  table checked equal to ours first) and Spark's AUTO CDC flow (refused on Delta today:
  the refusal is reported);
- cost growth: a batch touching 1 % of the keys, on a base of B keys and of 4B keys;
- freshness: ``lakehouse run --every`` while a producer lands files at a steady rate;
- warm cycles: one ``lakehouse run --every`` cycle applying 100 changes to one table, and
  one applying 1,000 changes spread over 24 tables (``benchmarks.warm_cycles``).

Each measurement runs in a process of its own (see ``benchmarks.child``). Results go to
``bench-results/`` (git-ignored): ``results.json``, ``results.md``, ``results.png``.
Exit 1 when a measurement failed or a peer's table differs from ours.

    make bench                                    # 1,000,000 events
    .venv/bin/python -m benchmarks.run --events 20000 --rate 200 --duration 20
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path
from typing import Any

from benchmarks.child import PartFailed, call_in_child, start_part
from benchmarks.generate import DEBEZIUM, Workload, write_bench_config
from benchmarks.results import write_results
from pyspark_jobs.settings import PROJECT_ROOT

EQUAL = {"missing": 0, "extra": 0}


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    meminfo = Path("/proc/meminfo").read_text().split()
    return {
        "cores": len(os.sched_getaffinity(0)),
        "memory_gib": int(meminfo[meminfo.index("MemTotal:") + 1]) / 2**20,
        "pyspark": version("pyspark"),
        "delta_spark": version("delta-spark"),
        "python": sys.version.split()[0],
    }


def _attempt(
    name: str, measure: Callable[[], dict[str, Any]], log: Callable[[str], None]
) -> dict[str, Any]:
    """Run one measurement; a failure is kept in the results (and fails the bench) instead
    of losing the measurements already taken."""
    log(f"bench: {name} ...")
    started = time.time()
    try:
        figures = measure()
    except (PartFailed, RuntimeError, TimeoutError, OSError) as exc:
        log(f"bench: {name} FAILED: {exc}")
        return {"error": str(exc)}
    log(f"bench: {name} done in {time.time() - started:.0f} s")
    return figures


def problems(results: dict[str, Any]) -> list[str]:
    """What makes the run's comparisons invalid: failed parts, unequal tables, gates."""
    found = []

    def part(label: str, figures: dict[str, Any]) -> bool:
        if "error" in figures:
            found.append(f"{label}: {figures['error'].splitlines()[0]}")
            return False
        return True

    if part("copy floor", results["copy_floor"]) and not results["copy_floor"]["rows"]:
        found.append("copy floor: wrote no rows")
    for label, run in (
        ("lakehouse run", results["ours"]),
        ("lakehouse run (Debezium only)", results["debezium"]["ours"]),
    ):
        if part(label, run) and not run["succeeded"]:
            found.append(f"{label}: {run['status']}")
    peer = results["debezium"]["peer"]
    if part("hand-written MERGE", peer) and peer["differences"] != EQUAL:
        found.append(f"hand-written MERGE: table differs from ours: {peer['differences']}")
    auto = results["debezium"]["auto_cdc"]
    if part("AUTO CDC", auto) and auto["status"] == "ran" and auto["differences"] != EQUAL:
        found.append(f"AUTO CDC: table differs from ours: {auto['differences']}")
    for label in ("B", "4B"):
        growth = results["cost_growth"][label]
        if part(f"cost growth {label}", growth):
            for run in ("base", "batch"):
                if not growth[run]["succeeded"]:
                    found.append(f"cost growth {label} {run}: {growth[run]['status']}")
    fresh = results["freshness"]
    if part("freshness", fresh) and not fresh["visible_rows"]:
        found.append("freshness: no change became visible in gold")
    part("warm cycles", results["warm_cycles"])
    return found


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--events", type=int, default=1_000_000, help="changes in the workload (default 1000000)"
    )
    parser.add_argument(
        "--keys", type=int, help="keys per source (default: events / 10, at least 10)"
    )
    parser.add_argument(
        "--growth-keys",
        type=int,
        help="B, the smaller base of the cost-growth runs, in keys per source "
        "(default: keys / 4, at least 100)",
    )
    parser.add_argument(
        "--rate", type=float, default=2000, help="freshness: events/s landed (default 2000)"
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=120,
        help="freshness: seconds the producer keeps landing (default 120)",
    )
    parser.add_argument(
        "--every",
        type=float,
        default=0,
        help="freshness: `lakehouse run --every` (default 0: cycles back to back)",
    )
    parser.add_argument("--out-of-order", type=float, default=0.05, help="share (default 0.05)")
    parser.add_argument("--redelivered", type=float, default=0.02, help="share (default 0.02)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--out",
        type=Path,
        default=PROJECT_ROOT / "bench-results",
        help="results folder (default bench-results/)",
    )
    parser.add_argument(
        "--work",
        type=Path,
        help="folder for the landing files and lakes (default: a temporary one, deleted after)",
    )
    args = parser.parse_args(argv)
    args.keys = args.keys or max(10, args.events // 10)
    args.growth_keys = args.growth_keys or max(100, args.keys // 4)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="lakehouse-bench-"))
    work.mkdir(parents=True, exist_ok=True)

    def log(message: str) -> None:
        print(message, flush=True)

    results: dict[str, Any] = {
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "parameters": {
            k: getattr(args, k)
            for k in ("events", "keys", "growth_keys", "rate", "duration", "every")
            + ("out_of_order", "redelivered", "seed")
        },
        "machine": machine(),
        "load_average": {"before": os.getloadavg()[0]},
    }
    landing = work / "landing"
    started = time.time()
    records = Workload(
        args.keys, seed=args.seed, out_of_order=args.out_of_order, redelivered=args.redelivered
    ).write(landing, args.events, files_per_source=8)
    results["workload"] = {
        "records": records,
        "total_records": sum(records.values()),
        "landing_mib": sum(p.stat().st_size for p in landing.rglob("*.jsonl")) / 2**20,
        "seconds": time.time() - started,
    }
    log(f"bench: {sum(records.values()):,} records landed under {landing}")

    def lake(name: str) -> str:
        return str(work / name / "lake")

    results["copy_floor"] = _attempt(
        "copy floor",
        lambda: start_part(
            "benchmarks.copy_floor",
            {"lake": lake("floor"), "landing": str(landing)},
            work / "floor",
        ),
        log,
    )
    results["ours"] = _attempt(
        "lakehouse run",
        lambda: start_part(
            "benchmarks.ours",
            {"lake": lake("ours"), "config": str(write_bench_config(work / "ours", landing))},
            work / "ours",
        ),
        log,
    )
    debezium_config = write_bench_config(work / "ours-debezium", landing, sources=[DEBEZIUM])
    our_users = str(Path(lake("ours-debezium")) / "warehouse" / "gold.db" / "users")
    results["debezium"] = {
        "records": records[DEBEZIUM],
        "ours": _attempt(
            "lakehouse run, Debezium only",
            lambda: start_part(
                "benchmarks.ours",
                {"lake": lake("ours-debezium"), "config": str(debezium_config)},
                work / "ours-debezium",
            ),
            log,
        ),
        "peer": _attempt(
            "hand-written foreachBatch MERGE",
            lambda: start_part(
                "benchmarks.peer_merge",
                {"lake": lake("peer"), "landing": str(landing / DEBEZIUM), "ours": our_users},
                work / "peer",
            ),
            log,
        ),
        "auto_cdc": _attempt(
            "AUTO CDC",
            lambda: call_in_child(
                "benchmarks.auto_cdc:try_auto_cdc",
                work / "auto-cdc",
                debezium_landing=str(landing / DEBEZIUM),
                ours=our_users,
                folder=str(work / "auto-cdc" / "pipeline"),
            ),
            log,
        ),
    }
    growth: dict[str, Any] = {}
    for label, keys in (("B", args.growth_keys), ("4B", 4 * args.growth_keys)):
        folder = work / f"growth-{label}"
        growth[label] = _attempt(
            f"cost growth, base {label} = {keys:,} keys",
            lambda folder=folder, keys=keys: start_part(  # type: ignore[misc]
                "benchmarks.cost_growth",
                {
                    "lake": str(folder / "lake"),
                    "config": str(write_bench_config(folder, folder / "landing")),
                    "landing": str(folder / "landing"),
                    "keys": keys,
                    "seed": args.seed,
                    "events_per_key": 4,
                },
                folder,
            ),
            log,
        )
    results["cost_growth"] = growth
    results["freshness"] = _attempt(
        f"freshness at {args.rate:g} events/s",
        lambda: call_in_child(
            "benchmarks.freshness:measure_freshness",
            work / "freshness",
            folder=str(work / "freshness" / "run"),
            keys=args.keys,
            seed=args.seed,
            rate=args.rate,
            duration=args.duration,
            every=args.every,
        ),
        log,
    )
    results["warm_cycles"] = _attempt(
        "warm cycles",
        lambda: call_in_child(
            "benchmarks.warm_cycles:measure_warm_cycles",
            work / "warm-cycles",
            folder=str(work / "warm-cycles" / "run"),
        ),
        log,
    )
    results["load_average"]["after"] = os.getloadavg()[0]
    results["problems"] = problems(results)
    paths = write_results(results, args.out)
    print(paths["markdown"].read_text())
    log(f"bench: results in {', '.join(str(p) for p in paths.values())}")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if results["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
