"""``lakehouse run``: every layer in order in one Spark session, each behind its gate.

A layer is built, then validated (unless nothing its gate checks changed since the gate
last passed: ``quality/gate_reuse.py``); a failed gate stops the run before the next layer and
the run exits 1. Nothing is rolled back: bronze and silver are append-only and gold
applies from its own progress marker, so once the data or the threshold is fixed the
next run continues from where this one stopped.

``lakehouse run --every SECONDS`` repeats that run as cycles in the same (warm) session
until it is asked to stop; see ``run_continuously``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from pyspark.sql import SparkSession

from pyspark_jobs.bronze.ingest import ingest
from pyspark_jobs.catalog import lookups_kept
from pyspark_jobs.config import LakehouseConfig
from pyspark_jobs.errors import describe
from pyspark_jobs.file_growth import FileGrowth
from pyspark_jobs.gold.apply import TableApply
from pyspark_jobs.gold.rebuild import apply_gold_finishing_rebuilds
from pyspark_jobs.maintain import compact_grown_tables, maintain
from pyspark_jobs.quality.gate_reuse import gate_in_run
from pyspark_jobs.quality.gate_steps import DOCS_STEP
from pyspark_jobs.quality.gates import GateResult, render_run_docs
from pyspark_jobs.quality.gx_context import data_docs_index
from pyspark_jobs.quality.report import write_report
from pyspark_jobs.run_summary import (
    RunSummary,
    bronze_totals,
    format_summary,
    last_gold_freshness,
    silver_totals,
)
from pyspark_jobs.settings import Settings
from pyspark_jobs.silver.build import build_silver
from pyspark_jobs.silver.dbt_runner import DbtTestsFailed

EXIT_OK, EXIT_FAILED = 0, 1


def gate_failure_message(gate: GateResult, report: str) -> str:
    """The short message a failed gate leaves in the log: what failed, where to look."""
    lines = [f"{gate.layer} gate FAILED; the run stopped before the next layer:"]
    lines += [f"  - {failure}" for failure in gate.failures]
    lines.append(f"report: {report}")
    return "\n".join(lines)


def dbt_tests_failure_message(layer: str, failed: DbtTestsFailed, report: str) -> str:
    """The message of a layer whose dbt data tests failed: each test, where it is declared,
    what it found and the query of the offending rows."""
    lines = [f"{layer} dbt tests FAILED; the run stopped before the {layer} gate:"]
    lines += [f"  - {failure}" for failure in failed.failures]
    lines.append(f"report: {report}")
    return "\n".join(lines)


def _build_layers(
    spark: SparkSession,
    settings: Settings,
    config: LakehouseConfig,
    log: Callable[[str], None],
    take_locks: bool,
) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    """Each layer's build step, returning the counts the summary keeps."""

    def bronze() -> dict[str, Any]:
        ingest(spark, settings, config, log=log, take_locks=take_locks)
        return bronze_totals(spark)

    def silver() -> dict[str, Any]:
        build_silver(spark, settings, config, log=log)
        return silver_totals(spark)

    def gold() -> dict[str, Any]:
        applied = apply_gold_finishing_rebuilds(spark, config, log=log)
        return gold_totals(applied, last_gold_freshness(settings.state_dir / "runs"))

    return [("bronze", bronze), ("silver", silver), ("gold", gold)]


def _utc_iso(moment: datetime) -> str:
    # PySpark hands timestamps back as naive local times; astimezone() reads a naive value
    # as local time too, so both naive and aware values end up as the same UTC instant.
    return moment.astimezone(timezone.utc).isoformat()


def gold_totals(
    tables: Iterable[TableApply], earlier: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """What the summary keeps of a gold apply, per table: rows, changes applied, states
    rejected (``lakehouse.gold_rejects``), and ``freshness``: the event time (UTC, ISO
    8601) of the newest change applied to the table, in this run or before it.

    ``earlier``: the freshness an earlier run's summary kept (``last_gold_freshness``).
    A table this run applied nothing to keeps its earlier value, so an idle cycle's
    summary and the report still say how stale each table is; a late change older than
    the table's newest keeps the newest. Tables not in ``tables`` (no longer configured)
    are dropped."""
    tables = list(tables)
    earlier = earlier or {}
    freshness: dict[str, str] = {}
    for t in tables:
        known = [earlier.get(t.table) or ""]
        if t.newest_event_ts is not None:
            known.append(_utc_iso(t.newest_event_ts))
        moments = [(moment, text) for text in known if (moment := _instant(text)) is not None]
        if moments:
            freshness[t.table] = max(moments)[1]
    return {
        "rows": {t.table: t.rows for t in tables},
        "applied": {t.table: t.changes for t in tables},
        "rejected": {t.table: t.rejected for t in tables},
        "freshness": freshness,
    }


def _instant(text: str) -> datetime | None:
    """An ISO 8601 time with its offset, as an instant; None when missing or unreadable
    (a summary edited by hand)."""
    try:
        moment = datetime.fromisoformat(text) if text else None
    except (TypeError, ValueError):
        return None
    return moment if moment is None or moment.tzinfo is not None else None


def write_run_report(settings: Settings) -> str:
    """Rewrite the report page from the run summaries; its path."""
    return str(
        write_report(
            settings.reports_dir, settings.state_dir / "runs", data_docs_index(settings.reports_dir)
        )
    )


def _render_docs(
    settings: Settings, since: datetime, layers: list[str], log: Callable[[str], None]
) -> float:
    """Render the Data Docs of the run's validated gates; the seconds it took. A failure
    is logged, not raised: the verdicts stand, and a gate whose page is missing is
    validated again by the next run."""
    started = time.time()
    try:
        render_run_docs(settings, since, layers)
    except Exception as exc:  # noqa: BLE001 - the pages are the report's, not the verdict
        log(f"data docs: not rendered ({describe(exc)}); the next run validates these gates again")
    return time.time() - started


def run_pipeline(
    spark: SparkSession,
    settings: Settings,
    config: LakehouseConfig,
    log: Callable[[str], None] = print,
    take_locks: bool = True,
) -> int:
    """Run bronze -> gate -> silver -> gate -> gold -> gate; return the process exit code.

    The silver step's dbt data tests stop the run as a gate does: a failed test stops it
    before the silver gate, with the test named, and the run exits 1.

    ``take_locks=False`` when the caller already holds every source's ingest lock.
    """
    summary = RunSummary()
    status = "failed"
    failed_gate: GateResult | None = None
    failed_tests: tuple[str, DbtTestsFailed] | None = None
    # The gates validated in this run: their Data Docs are rendered once, at its end.
    docs_since, validated = datetime.now(timezone.utc), []
    try:
        # One run's catalog answers are kept for the run (catalog.py).
        with lookups_kept():
            for layer, build in _build_layers(spark, settings, config, log, take_locks):
                # Progress lines for whoever watches a long run (and the crash drills).
                log(f"{layer}: building")
                started = time.time()
                try:
                    summary.layers[layer] = build()
                except DbtTestsFailed as failed:
                    summary.timings[layer] = time.time() - started
                    failed_tests = (layer, failed)
                    status = f"stopped by the {layer} dbt tests"
                    break
                summary.timings[layer] = time.time() - started
                # Validated, or passed again unchecked when nothing it reads changed since it
                # last passed (quality/gate_reuse.py); either line is logged there.
                gate = gate_in_run(spark, settings, config, layer, summary.run_id, log=log)
                summary.gates[layer] = gate.as_dict()
                summary.timings[f"{layer} gate"] = gate.seconds
                if not gate.reused_from:
                    validated.append(layer)
                if not gate.success:
                    failed_gate = gate
                    status = f"stopped by the {layer} gate"
                    break
            else:
                status = "succeeded"
    finally:
        if validated:
            summary.timings[DOCS_STEP] = _render_docs(settings, docs_since, validated, log)
        summary.finish(status)
        path = summary.save(settings.state_dir / "runs", keep=config.run_summaries_kept)
        log(format_summary(summary))
        log(f"run summary: {path}")
        report = write_run_report(settings)
        if failed_gate is not None:
            log(gate_failure_message(failed_gate, report))
        elif failed_tests is not None:
            log(dbt_tests_failure_message(*failed_tests, report))
        else:
            log(f"report: {report}")
    return EXIT_OK if failed_gate is None and failed_tests is None else EXIT_FAILED


def run_continuously(
    spark: SparkSession,
    settings: Settings,
    config: LakehouseConfig,
    every_seconds: float,
    stop: threading.Event,
    log: Callable[[str], None] = print,
    take_locks: bool = True,
    maintain_every_seconds: float | None = None,
    compact_files: int = 0,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Run the pipeline in cycles in this session until ``stop`` is set; return 0.

    A cycle is one ``run_pipeline`` (its own run summary and report); one starts every
    ``every_seconds`` after the previous one started, or at once when that one took
    longer. A cycle stopped by a gate promotes nothing past the gate, and the next cycle
    tries again. ``stop`` is only looked at between cycles, so the cycle in flight always
    finishes (SIGTERM / Ctrl-C in ``lakehouse run --every``). An error in a step (not a
    gate) ends the loop by raising, as in a single run.

    ``maintain_every_seconds``: after the first cycle that ends that long after the start
    or the last maintenance, every table is maintained (``maintain.maintain``) before the
    next cycle: a loop that holds the pipeline's locks for good leaves no gap for a
    separate ``lakehouse maintain``.

    ``compact_files``: between two cycles, each table that gained that many data files
    since the loop last compacted it is compacted (``file_growth``; 0: never, the default).
    """
    cycle = 0
    maintained = clock()
    growth = FileGrowth(compact_files)
    while not stop.is_set():
        cycle += 1
        started = clock()
        log(f"cycle {cycle}: started")
        code = run_pipeline(spark, settings, config, log=log, take_locks=take_locks)
        # The run summary just printed names the gate or the dbt tests that stopped it.
        outcome = "succeeded" if code == EXIT_OK else "stopped by a gate or dbt's data tests"
        log(f"cycle {cycle}: {outcome} in {clock() - started:.1f} s")
        if (
            maintain_every_seconds is not None
            and clock() - maintained >= maintain_every_seconds
            and not stop.is_set()
        ):
            log(f"cycle {cycle}: maintaining the tables")
            maintain(spark, config, log=log)
            maintained = clock()
        elif compact_files > 0 and not stop.is_set():
            compact_grown_tables(spark, growth, log=log)
        stop.wait(max(0.0, every_seconds - (clock() - started)))
    log(f"run --every: stop requested; ended after cycle {cycle}")
    return EXIT_OK
