"""Where a warm one-table cycle's wall time goes, per pipeline function, in one session.

Runs ``run_pipeline`` cycles in this process on a lake that ``benchmarks.warm_cycles
--work DIR`` left (its one Debezium source of 24 tables), each cycle after landing
``--changes`` changes to one table, and times the functions of ``STEPS`` (wrapped where
the pipeline's modules hold them; a function inside another is counted in both). Prints
each cycle's wall time and step times, then the medians of the cycles after ``--warm``::

    .venv/bin/python -m benchmarks.warm_cycles --work /tmp/warm --cycles 1
    .venv/bin/python -m benchmarks.step_times /tmp/warm [--warm 3] [--cycles 6]

The figures are for comparing lakes or code on one machine within the hour (e.g. the
same lake before and after ``lakehouse maintain``: docs/performance.md), not targets.
"""

from __future__ import annotations

import argparse
import importlib
import os
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.warm_cycles import WideWorkload

# (module, function): the stages and the steps inside them worth telling apart.
STEPS = (
    ("pyspark_jobs.bronze.ingest", "ingest"),
    ("pyspark_jobs.silver.build", "build_silver"),
    ("pyspark_jobs.silver.dbt_runner", "run_dbt"),
    ("pyspark_jobs.silver.build", "_record_build"),
    ("pyspark_jobs.gold.rebuild", "apply_gold_finishing_rebuilds"),
    ("pyspark_jobs.gold.apply", "fold_and_stage"),
    ("pyspark_jobs.gold.apply", "apply_staged"),
    ("pyspark_jobs.gold.merge", "merge_into_gold"),
    ("pyspark_jobs.gold.merge", "expire_tombstones"),
    ("pyspark_jobs.quality.gate_reuse", "gate_in_run"),
    ("pyspark_jobs.quality.gates", "run_gate"),
    ("pyspark_jobs.pipeline", "write_run_report"),
)


@contextmanager
def timed_functions(
    steps: Sequence[tuple[str, str]], package: str = "pyspark_jobs"
) -> Iterator[dict[str, float]]:
    """Seconds spent in each ``module.function`` of ``steps`` while the block runs, keyed
    ``"<module's last name>.<function>"``: each function is replaced wherever a loaded
    module of ``package`` holds it, and put back after."""
    spent: dict[str, float] = defaultdict(float)
    replaced: list[tuple[Any, str, Callable[..., Any]]] = []

    def timing(key: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[key] += time.perf_counter() - started

        return timed

    for module_name, name in steps:
        original = getattr(importlib.import_module(module_name), name)
        wrapper = timing(f"{module_name.rsplit('.', 1)[-1]}.{name}", original)
        for module in list(sys.modules.values()):
            module_of = getattr(module, "__name__", "") or ""
            if module_of.split(".")[0] == package and getattr(module, name, None) is original:
                setattr(module, name, wrapper)
                replaced.append((module, name, original))
    try:
        yield spent
    finally:
        for module, name, original in replaced:
            setattr(module, name, original)


def medians(cycles: Sequence[dict[str, float]]) -> dict[str, float]:
    """Each key's median over ``cycles`` (0 in a cycle that did not call it), largest
    first."""
    keys = {key for cycle in cycles for key in cycle}
    found = {key: statistics.median(c.get(key, 0.0) for c in cycles) for key in keys}
    return dict(sorted(found.items(), key=lambda item: -item[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.step_times",
        description="Time the pipeline's steps over warm one-table cycles on a lake left "
        "by `benchmarks.warm_cycles --work DIR`.",
    )
    parser.add_argument("work", type=Path, help="the --work folder of benchmarks.warm_cycles")
    parser.add_argument("--warm", type=int, default=3, help="cycles left out first (default 3)")
    parser.add_argument("--cycles", type=int, default=6, help="cycles timed (default 6)")
    parser.add_argument("--changes", type=int, default=100, help="changes a cycle (default 100)")
    parser.add_argument(
        "--compact-files",
        type=int,
        default=0,
        metavar="N",
        help="after each cycle, compact the tables that gained N files, as `run --every "
        "--compact-files N` does (timed as `compact_grown_tables`; default 0: never)",
    )
    args = parser.parse_args(argv)
    # dbt's own progress lines would bury the cycles' (its file log keeps them).
    os.environ.setdefault("DBT_QUIET", "true")

    from pyspark_jobs.config import load_config
    from pyspark_jobs.file_growth import FileGrowth
    from pyspark_jobs.maintain import compact_grown_tables
    from pyspark_jobs.pipeline import run_pipeline
    from pyspark_jobs.session import get_spark
    from pyspark_jobs.settings import Settings

    settings = Settings.from_env().with_overrides(
        lake_root=args.work / "lake", config_path=args.work / "config" / "sources.yml"
    )
    spark = get_spark(settings)
    config = load_config(settings.config_path)
    workload = WideWorkload(len(list(config.tables())))
    # New files, positions and sequence numbers past anything an earlier run landed.
    base = random.randint(10**6, 10**8)
    workload.files, workload.lsn = base, base * 1000
    workload.offsets = {t: base * 1000 for t in workload.tables}
    # Updates of keys 1..100, which every table has; its "new" keys may exist already
    # (then they are updates too): the changes a cycle applies are the same count.
    workload.keys = {t: 100 for t in workload.tables}
    timed: list[tuple[float, dict[str, float]]] = []
    growth = FileGrowth(args.compact_files)
    for cycle in range(args.warm + args.cycles):
        table = workload.tables[cycle % 3]
        workload.write(args.work / "landing", {table: args.changes}, now_ms=int(time.time() * 1000))
        with timed_functions(STEPS) as spent:
            started = time.perf_counter()
            code = run_pipeline(spark, settings, config, log=lambda _: None)
            wall = time.perf_counter() - started
        if args.compact_files:
            started = time.perf_counter()
            compact_grown_tables(spark, growth, log=print)
            spent["compact_grown_tables"] = time.perf_counter() - started
        steps = {k: round(v, 2) for k, v in sorted(spent.items(), key=lambda kv: -kv[1])}
        print(f"cycle {cycle}: exit {code}, {wall:.2f} s: {steps}", flush=True)
        if cycle >= args.warm:
            timed.append((wall, dict(spent)))
    print(f"median wall {statistics.median(w for w, _ in timed):.2f} s over {len(timed)} cycles")
    for key, seconds in medians([s for _, s in timed]).items():
        print(f"median {key} {seconds:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
