"""Warm continuous cycles: what one ``lakehouse run --every`` cycle costs when little
changed, the two "warm cycle" targets of issue 12.

One Debezium source with ``tables`` tables (24 by default), a base of ``BASE_KEYS`` rows
in each, applied by a first (cold) cycle. Then, one cycle apart, batches land as one file
each and the cycle that applies a batch is timed (its own wall time and its run summary's
stage times):

- ``one_table``: ``ONE_TABLE_CHANGES`` changes to one table;
- ``spread``: ``SPREAD_CHANGES`` changes spread evenly over every table.

Part of ``make bench``; alone (a fresh lake under a temporary folder, the table printed)::

    .venv/bin/python -m benchmarks.warm_cycles [--tables 24] [--cycles 2] [--event-log DIR]

With ``--event-log DIR`` the run records Spark's event log there and the bench prints,
for each timed cycle, its Spark jobs per pipeline step (``benchmarks.event_log``).

Each batch is landed twice (``--cycles N``: N times): the first cycle of a new kind of
batch pays one-off costs (a changed dbt var makes dbt parse the project again), the last
is the steady figure. A
batch is a fifth new keys, the rest updates of existing ones, each key once, so the
cycle's run summary must show exactly the batch's changes applied per table and the
tables' row counts grown by the new keys: the bench checks both.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from benchmarks import event_log, results
from benchmarks.continuous import OutputLines, continuous_run, cycle_end, cycle_seconds
from benchmarks.generate import BENCH_QUALITY, land_file
from benchmarks.ours import LAYERS
from benchmarks.rss import RssSampler

WIDE = "bench_wide"
COLUMNS = {"ID": "bigint", "NAME": "string", "COINS": "bigint"}
BASE_KEYS = 100
ONE_TABLE_CHANGES = 100
SPREAD_CHANGES = 1000
NEW_KEYS_SHARE = 0.2


def table_names(tables: int) -> list[str]:
    return [f"t{n:02d}" for n in range(1, tables + 1)]


def wide_config(landing_root: Path, tables: int) -> dict[str, Any]:
    """A sources file: one Debezium source, one entity per table of ``table_names``."""
    return {
        "quality": dict(BENCH_QUALITY),
        "sources": [
            {
                "name": WIDE,
                "format": "debezium",
                "landing": str(landing_root / WIDE),
                "entities": [
                    {"name": f"shop.{t}", "table": t, "key": ["ID"], "columns": COLUMNS}
                    for t in table_names(tables)
                ],
            }
        ],
    }


class WideWorkload:
    """Debezium changes to ``tables`` tables; successive batches continue the streams
    (offsets, log positions, which keys exist)."""

    def __init__(self, tables: int) -> None:
        self.tables = table_names(tables)
        self.keys = dict.fromkeys(self.tables, 0)  # keys 1..n exist
        self.offsets = dict.fromkeys(self.tables, 0)
        self.lsn = 0
        self.files = 0

    def write(self, landing_root: Path, changes: dict[str, int], now_ms: int) -> None:
        """Land one file: ``changes[table]`` changes to each table (a ``NEW_KEYS_SHARE`` of
        them creates of new keys, the others updates of distinct existing keys)."""
        plan = {}
        for table, count in changes.items():
            new = count if not self.keys[table] else round(count * NEW_KEYS_SHARE)
            if count - new > self.keys[table]:
                raise ValueError(f"{table}: {count - new} updates, {self.keys[table]} keys")
            plan[table] = (count - new, new)
        lines = []
        for table, (updated, new) in plan.items():
            ids = [(i, "u") for i in range(1, updated + 1)]
            ids += [(self.keys[table] + i, "c") for i in range(1, new + 1)]
            self.keys[table] += new
            for key, op in ids:
                self.lsn += 1
                row = {"ID": key, "NAME": f"{table} {key} v{self.lsn}", "COINS": self.lsn}
                source = {"db": "shop", "table": table, "ts_ms": now_ms, "lsn": self.lsn}
                value = {"op": op, "before": None, "after": row, "source": source}
                record = {
                    "topic": f"shop.public.{table}",
                    "partition": 0,
                    "offset": self.offsets[table],
                    "timestamp": now_ms,
                    "key": {"ID": key},
                    "value": value,
                }
                self.offsets[table] += 1
                lines.append(json.dumps(record, separators=(",", ":")))
        self.files += 1
        land_file(landing_root, WIDE, self.files, lines)


def spread(tables: list[str], changes: int) -> dict[str, int]:
    """``changes`` over ``tables`` as evenly as they go."""
    each, extra = divmod(changes, len(tables))
    return {t: each + (1 if i < extra else 0) for i, t in enumerate(tables)}


def _cycle_applying(
    output: OutputLines, landed: float, timeout: float
) -> tuple[float, float, dict[str, Any]]:
    """The end (epoch seconds), wall time and run summary of the first cycle ending after
    ``landed`` that applied something to gold."""
    after = landed
    while True:
        at, line = output.wait_for(cycle_end, after, timeout)
        if "succeeded" not in line:
            raise RuntimeError(f"a warm cycle did not succeed: {line}")
        summaries = [
            text.removeprefix("run summary: ")
            for seen, text in output.lines
            if after < seen <= at and text.startswith("run summary: ")
        ]
        if not summaries:
            # Its summary came before the landing (an idle cycle ending then): it could
            # not have applied the batch.
            after = at
            continue
        summary = json.loads(Path(summaries[-1]).read_text())
        if any(summary["layers"].get("gold", {}).get("applied", {}).values()):
            return at, cycle_seconds(line), summary
        after = at


def _stage_seconds(summary: dict[str, Any]) -> dict[str, float]:
    """Seconds per layer (its gate counted under ``gates``), as ``make bench`` reports
    a run's."""
    timings = summary["timings"]
    return {layer: sum(timings.get(s, 0.0) for s in steps) for layer, steps in LAYERS.items()}


def _check(
    summary: dict[str, Any], changes: dict[str, int], rows: dict[str, int], kind: str
) -> None:
    """The cycle applied exactly the batch: its changes per table, its new keys."""
    gold = summary["layers"]["gold"]
    applied = {t.removeprefix("gold."): n for t, n in gold["applied"].items() if n}
    if applied != changes:
        raise RuntimeError(f"{kind}: applied {applied}, landed {changes}")
    held = {t.removeprefix("gold."): n for t, n in gold["rows"].items()}
    if held != rows:
        raise RuntimeError(f"{kind}: gold holds {held} rows, expected {rows}")


def measure_warm_cycles(
    folder: str,
    tables: int = 24,
    timeout: float = 1800,
    event_log_dir: Path | None = None,
    cycles: int = 2,
) -> dict[str, Any]:
    """Run ``lakehouse run --every`` on a fresh lake of ``tables`` tables and time the
    ``cycles`` cycles that apply each kind of batch (see the module docstring; the last
    is the steady figure); with ``event_log_dir``, each timed cycle's Spark jobs per step
    too (``steps``)."""
    work = Path(folder)
    landing, lake = work / "landing", work / "lake"
    config = work / "config" / "sources.yml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump(wide_config(landing, tables), sort_keys=False))
    workload = WideWorkload(tables)
    names = workload.tables
    workload.write(landing, dict.fromkeys(names, BASE_KEYS), now_ms=int(time.time() * 1000))
    batches = {
        "one_table": {names[0]: ONE_TABLE_CHANGES},
        "spread": spread(names, SPREAD_CHANGES),
    }
    figures: dict[str, Any] = {"tables": tables, "base_keys": BASE_KEYS}
    conf = None
    if event_log_dir is not None:
        event_log_dir.mkdir(parents=True, exist_ok=True)
        conf = {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": str(event_log_dir),
            "spark.eventLog.compress": "false",
        }
    windows: list[tuple[dict[str, Any], float, float]] = []
    with (
        continuous_run(lake, config, 3, work / "lakehouse.log", timeout, conf) as output,
        RssSampler(output.proc.pid) as sampler,
    ):
        cold_at, cold = output.wait_for(cycle_end, 0.0, timeout)
        figures["cold_cycle_seconds"] = cycle_seconds(cold)
        # One idle cycle: the first after the cold one still warms the JVM up.
        output.wait_for(cycle_end, cold_at, timeout)
        warm = time.time()
        for kind, changes in batches.items():
            timed = []
            for _ in range(cycles):
                landed = time.time()
                workload.write(landing, changes, now_ms=int(landed * 1000))
                ended, seconds, summary = _cycle_applying(output, landed, timeout)
                _check(summary, changes, dict(workload.keys), kind)
                timed.append({"seconds": seconds, "stages": _stage_seconds(summary)})
                windows.append((timed[-1], ended - seconds, ended))
            figures[kind] = {
                "changes": sum(changes.values()),
                "tables": len(changes),
                "cycles": timed,
                "seconds": timed[-1]["seconds"],
            }
        figures["peak_rss_bytes"] = sampler.peak(warm)
    if event_log_dir is not None:
        # Read once the run has ended: Spark has written the last cycle's events by then.
        events = list(event_log.read_events(event_log_dir))
        for cycle, start, end in windows:
            cost = event_log.step_costs(events, start, end)
            cycle["steps"] = [asdict(step) for step in cost.steps]
            cycle["driver_only_seconds"] = cost.driver_only_seconds
            cycle["steps_table"] = event_log.table(cost)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.warm_cycles",
        description="The warm-cycle part of `make bench` alone: its JSON and table.",
    )
    parser.add_argument("--tables", type=int, default=24, help="tables (default 24)")
    parser.add_argument("--work", type=Path, help="folder for the lake (default: temporary)")
    parser.add_argument(
        "--event-log",
        type=Path,
        metavar="DIR",
        help="record Spark's event log in DIR and print each timed cycle's jobs per step",
    )
    parser.add_argument(
        "--cycles",
        type=int,
        default=2,
        help="timed cycles of each kind of batch (default 2; the last is the steady figure)",
    )
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="lakehouse-warm-"))
    figures = measure_warm_cycles(
        str(work), tables=args.tables, event_log_dir=args.event_log, cycles=args.cycles
    )
    tables = {
        f"{kind} cycle {n}": cycle.pop("steps_table")
        for kind in ("one_table", "spread")
        for n, cycle in enumerate(figures[kind]["cycles"], start=1)
        if "steps_table" in cycle
    }
    print(json.dumps(figures, indent=2, sort_keys=True))
    print("\n".join(results.warm_cycles_table(figures)))
    for name, lines in tables.items():
        print(f"\n{name}: Spark jobs per step (benchmarks.event_log)\n" + "\n".join(lines))
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
