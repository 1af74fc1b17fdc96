"""The per-run summary: what each layer received and holds, per source and table.

Written as JSON under ``<lake>/_state/runs/`` (the report shows the last runs as a trend)
and printed at the end of ``lakehouse run``. A run that changed nothing is saved as
``<run_id>.idle.json``, so the report tells it apart by its name alone: a continuous run
writes one every cycle while its sources are quiet, and reading them all to find the runs
that did something would cost each cycle more than the cycle itself.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.bronze.tables import QUARANTINE_TABLE, RAW_TABLE
from pyspark_jobs.catalog import table_exists
from pyspark_jobs.delta_log import appended_rows_since, rows_per_partition
from pyspark_jobs.durations import freshness_seconds, human_seconds
from pyspark_jobs.quality.definitions import LAYERS
from pyspark_jobs.version_memo import CommitKey, memoized

# The name ending of the summary of a run that changed nothing (``changed_nothing``).
IDLE_SUFFIX = ".idle.json"


@dataclass
class RunSummary:
    """Counts and outcomes of one pipeline run."""

    run_id: str = field(
        default_factory=lambda: datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    )
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    status: str = "running"
    command: str = "run"
    layers: dict[str, dict[str, Any]] = field(default_factory=dict)
    gates: dict[str, dict[str, Any]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def finish(self, status: str) -> None:
        self.status = status
        self.finished_at = time.time()

    def save(self, runs_dir: Path, keep: int | None = None) -> Path:
        """Write the summary as ``runs_dir/<run_id>.json`` (``<run_id>.idle.json`` when the
        run changed nothing); with ``keep``, then prune the folder (``prune_summaries``).
        Returns the file written."""
        runs_dir.mkdir(parents=True, exist_ok=True)
        saved = asdict(self)
        suffix = IDLE_SUFFIX if changed_nothing(saved) else ".json"
        path = runs_dir / f"{self.run_id}{suffix}"
        path.write_text(json.dumps(saved, indent=2, sort_keys=True, default=str))
        if keep is not None:
            prune_summaries(runs_dir, keep)
        return path


def changed_nothing(summary: dict[str, Any]) -> bool:
    """Whether a run summary (as saved) is of a run that changed nothing: a ``run`` that
    succeeded, each layer's gate passed as in an earlier run because nothing it checks had
    changed, and no change applied to gold."""
    gates = summary.get("gates", {})
    applied = summary.get("layers", {}).get("gold", {}).get("applied", {})
    return (
        summary.get("command") == "run"
        and summary.get("status") == "succeeded"
        and all(gates.get(layer, {}).get("reused_from") for layer in LAYERS)
        and not any(applied.values())
    )


def is_idle(path: Path) -> bool:
    """Whether a summary file is of a run that changed nothing, by its name."""
    return path.name.endswith(IDLE_SUFFIX)


def run_id_of(path: Path) -> str:
    """The run id a summary file is named after (``<run_id>.json``, ``<run_id>.idle.json``)."""
    return path.name.removesuffix(IDLE_SUFFIX).removesuffix(".json")


def prune_summaries(runs_dir: Path, keep: int) -> int:
    """Keep the newest ``keep`` summaries of runs that changed something and the newest
    ``keep`` of runs that changed nothing in ``runs_dir``; remove the rest, and return how
    many went.

    A continuous run writes one every cycle (about 30 KB, even for a cycle with nothing
    new), so without a bound the folder grows by hundreds of MB a day and the report,
    which lists it every cycle, slows with it. Counted apart, hours of quiet cycles do not
    push the last runs that did something out of the report's trend. Run ids sort by time."""
    newest_first = sorted(runs_dir.glob("*.json"), reverse=True)
    older = [p for p in newest_first if is_idle(p)][keep:]
    older += [p for p in newest_first if not is_idle(p)][keep:]
    for path in older:
        path.unlink(missing_ok=True)
    return len(older)


def last_gold_freshness(runs_dir: Path) -> dict[str, str]:
    """``layers.gold.freshness`` of the newest run summary in ``runs_dir`` that has a gold
    layer (runs stopped before gold, and ``validate``, have none); empty when there is
    none. Unreadable summaries are skipped."""
    for path in sorted(runs_dir.glob("*.json"), reverse=True):
        try:
            gold = json.loads(path.read_text()).get("layers", {}).get("gold")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(gold, dict) and isinstance(gold.get("freshness"), dict):
            return {str(k): str(v) for k, v in gold["freshness"].items()}
    return {}


def counts_by(spark: SparkSession, table: str, column: str) -> dict[str, int]:
    """Row counts of ``table`` grouped by ``column`` (a handful of groups): from Delta's
    log when ``column`` partitions the table, so that the summary's cost does not grow
    with the data the lake holds; else by counting the rows. Kept in this process between
    runs (``version_memo``): a later run adds the rows of the commits since that only
    appended, read from their log entries, and counts again only after anything else."""
    if not table_exists(spark, table):
        return {}

    def read() -> dict[str, int]:
        from_log = rows_per_partition(spark, table, column)
        if from_log is not None:
            return from_log
        rows = spark.table(table).groupBy(column).agg(F.count(F.lit(1)).alias("n")).collect()
        return {str(r[column]): int(r["n"]) for r in rows}

    def catch_up(
        counts: dict[str, int], kept_at: CommitKey, now: CommitKey
    ) -> dict[str, int] | None:
        added = appended_rows_since(spark, table, column, kept_at.version, now.version)
        if added is None:
            return None
        return {v: counts.get(v, 0) + added.get(v, 0) for v in counts.keys() | added.keys()}

    counts: dict[str, int] = memoized(spark, table, f"rows per {column}", read, catch_up)
    return dict(counts)


def bronze_totals(spark: SparkSession) -> dict[str, Any]:
    """Records held in bronze and quarantine, per source."""
    return {
        "records": counts_by(spark, RAW_TABLE, "source"),
        "quarantined": counts_by(spark, QUARANTINE_TABLE, "source"),
    }


def silver_totals(spark: SparkSession) -> dict[str, Any]:
    """Changes in the change log and rejects, per source."""
    return {
        "changes": counts_by(spark, "silver.change_log", "source"),
        "rejects": counts_by(spark, "silver.change_log_rejects", "source"),
    }


def format_summary(summary: RunSummary) -> str:
    """The human-readable block ``lakehouse run`` prints."""
    lines = [f"run {summary.run_id}: {summary.status}"]
    bronze = summary.layers.get("bronze", {})
    for src, n in sorted(bronze.get("records", {}).items()):
        q = bronze.get("quarantined", {}).get(src, 0)
        lines.append(f"  bronze  {src:<28} {n:>8} records  {q:>6} quarantined")
    silver = summary.layers.get("silver", {})
    for src, n in sorted(silver.get("changes", {}).items()):
        r = silver.get("rejects", {}).get(src, 0)
        lines.append(f"  silver  {src:<28} {n:>8} changes  {r:>6} rejected")
    gold = summary.layers.get("gold", {})
    now = summary.finished_at or time.time()
    for table, rows in sorted(gold.get("rows", {}).items()):
        line = f"  gold    {table:<28} {rows:>8} rows"
        newest = gold.get("freshness", {}).get(table)
        if newest is not None:
            age = freshness_seconds(newest, now)
            # Seconds for scripts that read the line; beyond a minute also for people.
            line += f"  fresh {age:.1f} s" + (f" ({human_seconds(age)})" if age >= 60 else "")
        lines.append(line)
    for layer, gate in summary.gates.items():
        verdict = "passed" if gate.get("success") else "FAILED"
        line = f"  gate    {layer:<28} {verdict:>8}  {gate.get('seconds', 0):.1f} s"
        if gate.get("reused_from"):
            line += f"  not validated: nothing it checks changed since run {gate['reused_from']}"
        elif gate.get("rows_from"):
            unit = "tables" if layer == "gold" else "sources"
            line += (
                f"  counted again: {len(gate.get('recounted', []))} changed {unit}; "
                f"the others' rows from run {gate['rows_from']}"
            )
        lines.append(line)
        lines += [f"          - {failure}" for failure in gate.get("failures", [])]
    for step, seconds in summary.timings.items():
        lines.append(f"  time    {step:<28} {seconds:>8.1f} s")
    return "\n".join(lines)
