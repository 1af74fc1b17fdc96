"""Where a run's Spark time went, per pipeline step, from Spark's event log.

Every step names its Spark jobs (``pyspark_jobs.job_names``: ``gold: merge gold.t01``,
``gold gate: summary``); Delta names its own jobs after the step that caused them
(``Delta: gold: merge gold.t01: Writing modified data ...``). This reads an event log
(``--conf spark.eventLog.enabled=true --conf spark.eventLog.dir=DIR --conf
spark.eventLog.compress=false``) and sums, per step, its Spark jobs, their seconds and
the seconds in which at least one of them ran, over the whole log or a window of it (one
cycle of ``lakehouse run --every``). The seconds of the window in which no job ran at all
are the driver's alone: planning, Delta's log work, Python, dbt.

    .venv/bin/python -m benchmarks.event_log DIR [--start EPOCH --end EPOCH]

``benchmarks.warm_cycles --event-log DIR`` records one and prints this table for each
timed cycle. With ``--scans`` it prints instead, per step and table, the files and bytes
its scans read (Spark's scan metrics, as the SQL tab shows them): how much of a table a
step reads.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

JOB_START = "SparkListenerJobStart"
JOB_END = "SparkListenerJobEnd"
_SQL_EVENTS = "org.apache.spark.sql.execution.ui."
SQL_START = _SQL_EVENTS + "SparkListenerSQLExecutionStart"
SQL_PLAN_UPDATE = _SQL_EVENTS + "SparkListenerSQLAdaptiveExecutionUpdate"
DRIVER_METRICS = _SQL_EVENTS + "SparkListenerDriverAccumUpdates"
# A file scan of a catalog table, as its plan node is named ("Scan parquet
# spark_catalog.silver.change_log"), and the two driver metrics of what it read.
TABLE_SCAN = re.compile(r"^Scan \w+ (?:spark_catalog\.)?(?P<table>\w+\.\w+)$")
FILES_READ = "number of files read"
BYTES_READ = "size of files read"
# Delta prefixes its jobs' descriptions with this, once per layer of its own work.
DELTA_PREFIX = "Delta: "
# What Delta appends to the description of the step it works for.
DELTA_SUFFIX = re.compile(
    r"(?:: | - )(?:Filtering files|Compute snapshot|Writing modified|Rewriting|"
    r"MERGE operation|Scanning|Delta )"
)
# Delta's own jobs outside every named step start with one of these.
DELTA_OWN = re.compile(r"^(?:Filtering files|Compute snapshot|Writing modified|MERGE operation)")
# Gold tables, one step per table: summed as one step.
GOLD_TABLE = re.compile(r"\bgold\.[A-Za-z_][A-Za-z0-9_]*")
UNNAMED = "(no step named)"
DELTA_UNNAMED = "(Delta, no step named)"


class CompressedEventLog(ValueError):
    """The event log is compressed; Spark writes it plain with
    ``spark.eventLog.compress=false``."""


def step_of(description: str | None) -> str:
    """The pipeline step a Spark job belongs to, from its description: Delta's prefixes
    and suffixes taken off, every gold table's name as ``gold.*``."""
    text = (description or "").split("\n", 1)[0].strip()
    while text.startswith(DELTA_PREFIX):
        text = text[len(DELTA_PREFIX) :]
    if not text:
        return UNNAMED
    if DELTA_OWN.match(text):
        return DELTA_UNNAMED
    text = DELTA_SUFFIX.split(text, maxsplit=1)[0]
    return GOLD_TABLE.sub("gold.*", text)


def log_files(path: Path) -> list[Path]:
    """The files of one application's event log, in order: ``path`` itself (a file),
    the parts of a rolling log (an ``eventlog_v2_*`` folder), or those of the newest
    application in a folder of logs."""
    if path.is_file():
        files = [path]
    elif path.name.startswith("eventlog_v2_"):
        files = sorted(path.glob("events_*"), key=lambda p: int(p.name.split("_")[1]))
    else:
        # A running application's log counts too (``.inprogress``): a bench reads it live.
        apps = [p for p in path.iterdir() if not p.name.startswith(".")]
        if not apps:
            raise FileNotFoundError(f"no event log in {path}")
        return log_files(max(apps, key=lambda p: p.stat().st_mtime))
    compressed = [f for f in files if f.suffix in (".zstd", ".lz4", ".snappy", ".lzf")]
    if compressed:
        raise CompressedEventLog(
            f"{compressed[0]} is compressed: record the log with "
            "--conf spark.eventLog.compress=false"
        )
    return files


def read_events(path: Path) -> Iterator[dict]:
    """The events of the log at ``path`` (see ``log_files``), one JSON object each."""
    for file in log_files(path):
        with file.open(encoding="utf-8") as lines:
            for line in lines:
                # A running application may be writing the last line.
                if line.endswith("\n") and line.strip():
                    yield json.loads(line)


@dataclass
class StepCost:
    """One step's Spark jobs within a window."""

    step: str
    jobs: int = 0
    job_seconds: float = 0.0  # summed, jobs running side by side each counted
    busy_seconds: float = 0.0  # in which at least one of its jobs ran


@dataclass
class WindowCost:
    """A window's steps, and how much of it had no Spark job running at all."""

    seconds: float
    busy_seconds: float
    steps: list[StepCost]

    @property
    def driver_only_seconds(self) -> float:
        return self.seconds - self.busy_seconds


def _covered(intervals: Iterable[tuple[float, float]]) -> float:
    """The length of the union of ``intervals``."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def _in_window(at: float, start: float | None, end: float | None) -> bool:
    return (start is None or at >= start) and (end is None or at <= end)


def step_costs(
    events: Iterable[dict], start: float | None = None, end: float | None = None
) -> WindowCost:
    """Per step, the jobs submitted between ``start`` and ``end`` (epoch seconds; the
    whole log by default), clipped to the window."""
    started: dict[int, tuple[float, str]] = {}
    intervals: dict[str, list[tuple[float, float]]] = {}
    first, last = float("inf"), float("-inf")
    for event in events:
        kind = event.get("Event")
        if kind == JOB_START:
            at = event["Submission Time"] / 1000
            if _in_window(at, start, end):
                properties = event.get("Properties") or {}
                started[event["Job ID"]] = (at, step_of(properties.get("spark.job.description")))
        elif kind == JOB_END and event["Job ID"] in started:
            at, step = started.pop(event["Job ID"])
            stop = event["Completion Time"] / 1000
            if end is not None:
                stop = min(stop, end)
            intervals.setdefault(step, []).append((at, stop))
            first, last = min(first, at), max(last, stop)
    steps = [
        StepCost(
            step=step,
            jobs=len(spans),
            job_seconds=sum(stop - at for at, stop in spans),
            busy_seconds=_covered(spans),
        )
        for step, spans in intervals.items()
    ]
    steps.sort(key=lambda s: (-s.busy_seconds, s.step))
    window_start = start if start is not None else first
    window_end = end if end is not None else last
    seconds = max(0.0, window_end - window_start) if steps or start is not None else 0.0
    busy = _covered(span for spans in intervals.values() for span in spans)
    return WindowCost(seconds=seconds, busy_seconds=busy, steps=steps)


def table(cost: WindowCost) -> list[str]:
    """``cost`` as markdown lines."""
    lines = [
        "| step | Spark jobs | job seconds | seconds with a job running |",
        "|---|---:|---:|---:|",
    ]
    for s in cost.steps:
        lines.append(f"| {s.step} | {s.jobs} | {s.job_seconds:.2f} | {s.busy_seconds:.2f} |")
    jobs = sum(s.jobs for s in cost.steps)
    lines.append(
        f"| all ({cost.seconds:.1f} s; no job running in {cost.driver_only_seconds:.1f} s) "
        f"| {jobs} | {sum(s.job_seconds for s in cost.steps):.2f} | {cost.busy_seconds:.2f} |"
    )
    return lines


@dataclass
class ScanReads:
    """What one step's scans of one table read."""

    step: str
    table: str
    scans: int = 0
    files: int = 0
    bytes: int = 0


def _plan_nodes(node: dict) -> Iterator[dict]:
    yield node
    for child in node.get("children", []):
        yield from _plan_nodes(child)


def scan_reads(
    events: Iterable[dict], start: float | None = None, end: float | None = None
) -> list[ScanReads]:
    """Per step (the SQL query's description) and table, the files and bytes its file
    scans read, for the queries started between ``start`` and ``end`` (epoch seconds).

    A scan's metrics are accumulators its plan names (the plan as started, and as adaptive
    execution re-plans it, which keeps the scan's accumulators); the driver posts their
    values once the files are chosen."""
    # A scan node, by its own files metric: (step, table, files metric, bytes metric).
    scans: dict[int, tuple[str, str, int, int | None]] = {}
    step_of_query: dict[int, str] = {}
    values: dict[int, int] = {}
    for event in events:
        kind = event.get("Event")
        if kind == SQL_START and _in_window(event["time"] / 1000, start, end):
            step_of_query[event["executionId"]] = step_of(event.get("description"))
        if kind in (SQL_START, SQL_PLAN_UPDATE) and event["executionId"] in step_of_query:
            step = step_of_query[event["executionId"]]
            for node in _plan_nodes(event["sparkPlanInfo"]):
                scan = TABLE_SCAN.match(node.get("nodeName", ""))
                named = {m["name"]: m["accumulatorId"] for m in node.get("metrics", [])}
                if scan is not None and FILES_READ in named:
                    files = named[FILES_READ]
                    scans[files] = (step, scan["table"], files, named.get(BYTES_READ))
        elif kind == DRIVER_METRICS:
            for accumulator, value in event.get("accumUpdates", []):
                values[accumulator] = max(values.get(accumulator, 0), int(value))
    reads: dict[tuple[str, str], ScanReads] = {}
    for step, table, files, size in scans.values():
        entry = reads.setdefault((step, table), ScanReads(step, table))
        entry.scans += 1
        entry.files += values.get(files, 0)
        entry.bytes += values.get(size, 0) if size is not None else 0
    return sorted(reads.values(), key=lambda r: (r.table, -r.bytes, r.step))


def scans_table(reads: list[ScanReads]) -> list[str]:
    """``reads`` as markdown lines."""
    lines = ["| table | step | scans | files read | MiB read |", "|---|---|---:|---:|---:|"]
    for r in reads:
        lines.append(f"| {r.table} | {r.step} | {r.scans} | {r.files} | {r.bytes / 2**20:.2f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.event_log",
        description=(
            "Per pipeline step, the Spark jobs of an (uncompressed) event log, or the "
            "files and bytes its scans read of each table (--scans)."
        ),
    )
    parser.add_argument(
        "path", type=Path, help="an event log file, a rolling log's folder, or spark.eventLog.dir"
    )
    parser.add_argument("--start", type=float, help="from this time (epoch seconds)")
    parser.add_argument("--end", type=float, help="until this time (epoch seconds)")
    parser.add_argument(
        "--scans",
        action="store_true",
        help="per step and table, the files and bytes its scans read, instead of the jobs",
    )
    args = parser.parse_args(argv)
    try:
        events = read_events(args.path)
        if args.scans:
            lines = scans_table(scan_reads(events, args.start, args.end))
        else:
            lines = table(step_costs(events, args.start, args.end))
    except (OSError, CompressedEventLog) as error:
        print(f"event_log: {error}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
