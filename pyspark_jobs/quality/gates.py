"""Run one layer's gate: build its summary frame in one Spark query, validate it with GX as
one checkpoint, record every check with what it observed, then render the fresh Data Docs.

A gate fails closed: a failed expectation, a missing table, or a definition that cannot
be loaded all count as a failed gate; the pipeline stops before the next layer.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession

from pyspark_jobs.config import LakehouseConfig
from pyspark_jobs.errors import describe
from pyspark_jobs.job_names import named_jobs
from pyspark_jobs.quality import gx_context
from pyspark_jobs.quality.definitions import CheckpointSpec, load_checkpoint
from pyspark_jobs.quality.frames import (
    PROBLEM_COUNT,
    build_frame,
    problem_samples,
    tables_read,
)
from pyspark_jobs.settings import Settings
from pyspark_jobs.small_inputs import interpreted_when_small


@dataclass
class ExpectationOutcome:
    """One check: its verdict, what it observed on every row of the summary frame and the
    threshold it held the values to.

    ``values``: row (source or table) -> observed value; ``failing``: the rows GX found
    outside the threshold; ``details``: row -> examples naming what failed (offending
    values, keys, positions), for the failing rows.
    """

    expectation: str
    success: bool
    observed: str = ""
    check: str = ""
    column: str = ""
    threshold: str = ""
    values: dict[str, Any] = field(default_factory=dict)
    failing: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class CheckpointOutcome:
    """A layer's checkpoint: its checks, the summary rows they read, where Data Docs
    renders the validation, or the error that kept it from running."""

    name: str
    success: bool
    expectations: list[ExpectationOutcome] = field(default_factory=list)
    error: str | None = None
    asset: str = ""
    index: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)
    data_docs_page: str = ""
    samples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


@dataclass
class GateResult:
    """A layer's gate: passed or not, what failed, how long it took, where the report is.

    ``timings``: seconds of the summary query, of GX's validation and of Data Docs.
    ``reused_from``: set when the gate was not validated because nothing it checks
    changed since it passed in that run (``gate_reuse``): its checkpoints, checks and
    Data Docs page are that run's validation.
    ``recounted``, ``rows_from``: set when the gate validated a summary of which only the
    rows of the ``recounted`` gold tables (bronze and silver: sources) were computed; the
    others' rows are those validated in run ``rows_from``, whose inputs they still have
    (``gate_reuse``).
    """

    layer: str
    success: bool
    seconds: float
    checkpoints: list[CheckpointOutcome]
    data_docs: str
    run_name: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    reused_from: str = ""
    recounted: list[str] = field(default_factory=list)
    rows_from: str = ""

    @classmethod
    def reused(cls, stored: dict[str, Any], run_name: str, seconds: float) -> GateResult:
        """A passed result of run ``stored["run_name"]`` (``as_dict``), standing for this
        run's gate (``run_name``) without a validation."""
        checkpoints = [
            CheckpointOutcome(
                **{k: v for k, v in cp.items() if k != "expectations"},
                expectations=[ExpectationOutcome(**e) for e in cp.get("expectations", [])],
            )
            for cp in stored["checkpoints"]
        ]
        return cls(
            layer=stored["layer"],
            success=bool(stored["success"]),
            seconds=seconds,
            checkpoints=checkpoints,
            data_docs=stored.get("data_docs", ""),
            run_name=run_name,
            timings={"inputs": seconds},
            reused_from=stored["run_name"],
        )

    @property
    def failures(self) -> list[str]:
        """``checkpoint: column threshold, observed row=value`` for everything that failed."""
        out = []
        for cp in self.checkpoints:
            if cp.error:
                out.append(f"{cp.name}: {cp.error}")
            out += [
                f"{cp.name}: {e.column or e.expectation} {e.threshold}".rstrip()
                + (f", observed {e.observed}" if e.observed else "")
                for e in cp.expectations
                if not e.success
            ]
        return out

    def as_dict(self) -> dict[str, Any]:
        """What ``RunSummary.gates[layer]`` keeps."""
        data = asdict(self)
        data["failures"] = self.failures
        return data


def describe_expectation(config: Any) -> str:
    """``expect_column_values_to_be_unique(change_id)`` from an expectation configuration."""
    kwargs = config.kwargs
    columns = kwargs.get("column_list") or [
        kwargs[k] for k in ("column_A", "column_B") if k in kwargs
    ]
    target = kwargs.get("column") or ", ".join(columns)
    return f"{config.type}({target})"


def _resolve(value: Any, parameters: dict[str, Any]) -> Any:
    if isinstance(value, dict) and "$PARAMETER" in value:
        return parameters.get(value["$PARAMETER"])
    return value


def threshold_text(expectation: dict[str, Any], parameters: dict[str, Any]) -> str:
    """The bound a check holds its column to, as the report prints it: ``= 0``,
    ``≤ 0.01``, ``between 1 and 5``, ``is null``, ``not null``, ``in {a, b}``.

    >>> threshold_text({"type": "expect_column_values_to_be_between",
    ...     "kwargs": {"column": "r", "min_value": 0, "max_value": {"$PARAMETER": "m"}}},
    ...     {"m": 0.01})
    '≤ 0.01'
    """
    kwargs = expectation.get("kwargs", {})
    kind = expectation.get("type", "")
    if kind == "expect_column_values_to_be_between":
        low = _resolve(kwargs.get("min_value"), parameters)
        high = _resolve(kwargs.get("max_value"), parameters)
        if low is not None and low == high:
            return f"= {low}"
        if high is not None and low in (None, 0):
            return f"≤ {high}"
        if high is None:
            return f"≥ {low}"
        return f"between {low} and {high}"
    if kind == "expect_column_values_to_be_null":
        return "is null"
    if kind == "expect_column_values_to_not_be_null":
        return "not null"
    if kind == "expect_column_values_to_be_in_set":
        return "in {" + ", ".join(map(str, kwargs.get("value_set", []))) + "}"
    return ""


def _plain(value: Any) -> Any:
    """A value as JSON keeps it (NaN as None)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _row_name(value: Any) -> str:
    return "(null)" if value is None else str(value)


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "null" if value is None else str(value)


def parameters_for(config: LakehouseConfig) -> dict[str, Any]:
    """Suite parameters: the thresholds of config/sources.yml ``quality:``."""
    return {
        "quarantine_rate_max": config.quarantine_rate_max,
        "reject_rate_max": config.reject_rate_max,
    }


def check_outcomes(
    spec: CheckpointSpec,
    rows: list[dict[str, Any]],
    results: list[Any],
    parameters: dict[str, Any],
) -> list[ExpectationOutcome]:
    """Every expectation of the suite with GX's verdict on it, the value it observed on
    each summary row and its threshold (results are in suite order, as GX returns them)."""
    index = spec.index[0] if spec.index else None
    names = [_row_name(r.get(index)) if index else str(i) for i, r in enumerate(rows)]
    # GX does not keep suite order (an expectation that raised comes first), so results
    # are matched to the suite by what they check.
    by_check = {
        _check_key(r.expectation_config.type, r.expectation_config.kwargs): r for r in results
    }
    outcomes = []
    for expectation in spec.suite["expectations"]:
        column = expectation.get("kwargs", {}).get("column", "")
        meta = expectation.get("meta") or {}
        values = {n: _plain(r.get(column)) for n, r in zip(names, rows, strict=True)}
        result = by_check.get(_check_key(expectation["type"], expectation.get("kwargs", {})))
        failing: list[str] = []
        observed = ""
        if result is None:  # fail closed: a check GX did not report did not pass
            outcomes.append(
                ExpectationOutcome(expectation["type"], False, "error: no result from GX",
                                   str(meta.get("check", "")), column,
                                   threshold_text(expectation, parameters), values)
            )  # fmt: skip
            continue
        error = _error_of(result)
        if error:
            observed = f"error: {error[:200]}"
        else:
            unexpected = (result.result or {}).get("unexpected_index_list") or []
            failing = [
                _row_name(u.get(index)) if isinstance(u, dict) and index else str(u)
                for u in unexpected
            ]
        detail_column = meta.get("detail")
        details = {
            n: _plain(r.get(detail_column))
            for n, r in zip(names, rows, strict=True)
            if detail_column and n in failing and r.get(detail_column)
        }
        shown = failing if failing else ([] if result.success else names)
        if not observed:
            observed = ", ".join(
                f"{n}={_show(values.get(n))}"
                + (f" ({_show_detail(details[n])})" if n in details else "")
                for n in shown
            )
        outcomes.append(
            ExpectationOutcome(
                expectation=describe_expectation(result.expectation_config),
                success=bool(result.success),
                observed=observed,
                check=str(meta.get("check", "")),
                column=column,
                threshold=threshold_text(expectation, parameters),
                values=values,
                failing=failing,
                details=details,
            )
        )
    return outcomes


def _error_of(result: Any) -> str | None:
    """The message of an exception GX caught while checking (``exception_info`` is one
    record, or one per metric when a metric failed), or None."""
    info = result.exception_info or {}
    records = [info] if "raised_exception" in info else list(info.values())
    for record in records:
        if isinstance(record, dict) and record.get("raised_exception"):
            return str(record.get("exception_message"))
    return None


def _check_key(kind: str, kwargs: Any) -> tuple[str, str, tuple[str, ...]]:
    return (kind, str(kwargs.get("column", "")), tuple(kwargs.get("column_list") or ()))


def _show_detail(detail: Any) -> str:
    return ", ".join(map(str, detail)) if isinstance(detail, list) else str(detail)


Summary = tuple[list[dict[str, Any]], list[str]]


def summary_rows(
    spark: SparkSession,
    config: LakehouseConfig,
    spec: CheckpointSpec,
    frame: DataFrame | None = None,
) -> Summary:
    """The layer's summary frame (or ``frame``, built by the caller), computed by one
    Spark query and collected: its rows (sorted by the index) and columns.

    The frame has one row per source or gold table, small by construction, so it is
    collected to the driver once and GX validates that copy (no Spark job per expectation).
    """
    with named_jobs(spark, f"{spec.layer} gate: summary"):
        frame = build_frame(spark, config, spec) if frame is None else frame
        rows = [r.asDict(recursive=True) for r in frame.collect()]
    return sorted_rows(spec, [{k: _plain(v) for k, v in r.items()} for r in rows]), frame.columns


def sorted_rows(spec: CheckpointSpec, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Summary rows in the order of the layer's index (stable reports and Data Docs)."""
    index = spec.index[0] if spec.index else None
    return sorted(rows, key=lambda r: _row_name(r.get(index))) if index else rows


def validate_summary(
    context: Any,
    spec: CheckpointSpec,
    rows: list[dict[str, Any]],
    columns: list[str],
    parameters: dict[str, Any],
    run_name: str,
) -> tuple[CheckpointOutcome, Any]:
    """Validate summary rows with the layer's suite as one GX checkpoint run (stored for
    Data Docs); the outcome holds every check and the rows. Returns the stored result's key."""
    checkpoint = gx_context.register(context, spec)
    key, result = gx_context.run_checkpoint(
        context,
        checkpoint,
        pd.DataFrame.from_records(rows, columns=columns),
        parameters,
        run_name,
        spec.asset,
    )
    outcome = CheckpointOutcome(
        spec.name,
        bool(result.success),
        check_outcomes(spec, rows, list(result.results), parameters),
        asset=spec.asset,
        index=",".join(spec.index),
        rows=rows,
    )
    return outcome, key


def run_checkpoint(
    spark: SparkSession,
    config: LakehouseConfig,
    context: Any,
    spec: CheckpointSpec,
    run_name: str,
    timings: dict[str, float],
    summary: Callable[[CheckpointSpec], Summary] | None = None,
) -> tuple[CheckpointOutcome, Any]:
    """Build the summary (``summary``, by default ``summary_rows``), validate it, and
    record every check; an error (a missing table, an expectation GX rejects) fails the
    checkpoint. Returns the outcome and the stored result's key (None on error)."""
    try:
        started = time.time()
        if summary is None:
            rows, columns = summary_rows(spark, config, spec)
        else:
            rows, columns = summary(spec)
        timings["summary"] = time.time() - started
        started = time.time()
        outcome, key = validate_summary(
            context, spec, rows, columns, parameters_for(config), run_name
        )
        timings["validation"] = time.time() - started
    except Exception as exc:  # noqa: BLE001 - fail closed, with the reason in the report
        error = CheckpointOutcome(spec.name, False, error=describe(exc), asset=spec.asset)
        return error, None
    started = time.time()
    outcome.samples = _samples(spark, spec, rows)
    timings["samples"] = time.time() - started
    return outcome, key


def _samples(
    spark: SparkSession, spec: CheckpointSpec, rows: list[dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """A few set-aside rows with their reasons for the sources or tables whose summary
    counted some (no query at all on clean data). Only for the report: an error here is
    shown there, it does not fail the gate."""
    count = PROBLEM_COUNT.get(spec.layer)
    index = spec.index[0] if spec.index else None
    if not count or not index:
        return {}
    names = [str(r[index]) for r in rows if r.get(count) and r.get(index) is not None]
    try:
        with named_jobs(spark, f"{spec.layer} gate: samples"):
            return problem_samples(spark, spec.layer, names)
    except Exception as exc:  # noqa: BLE001 - reporting only
        return {name: [{"error": describe(exc)}] for name in names}


def default_run_name(layer: str) -> str:
    return f"{layer} gate {datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S%fZ')}"


def run_gate(
    spark: SparkSession,
    settings: Settings,
    config: LakehouseConfig,
    layer: str,
    run_name: str | None = None,
    summary: Callable[[CheckpointSpec], Summary] | None = None,
    render_docs: bool = True,
) -> GateResult:
    """Validate one layer as it is now; results go to the lake's GX context and Data Docs,
    which keep the layer's newest ``config.data_docs_results_kept`` results.

    ``run_name`` names the GX run (the lakehouse run id, so Data Docs and the run
    summary name the same run). ``summary``: what computes the summary rows, when not
    ``summary_rows`` (``gate_reuse`` recounts only the gold tables that changed).
    ``render_docs=False``: the result's Data Docs page is named but not rendered; the
    caller renders it with the other gates' of its run (``render_run_docs``).
    """
    started = time.time()
    since = datetime.now(timezone.utc)
    run_name = run_name or default_run_name(layer)
    try:
        spec = load_checkpoint(layer)
    except Exception as exc:  # noqa: BLE001 - a gate that cannot load fails closed
        outcome = CheckpointOutcome(f"{layer} gate definition", False, error=describe(exc))
        return GateResult(layer, False, time.time() - started, [outcome], "", run_name)
    context = gx_context.open_context(settings.reports_dir)
    timings: dict[str, float] = {}
    # The gate's queries over small tables run interpreted, as silver's and gold's do (a
    # gate's output is its result: no line about it).
    with interpreted_when_small(spark, f"{layer} gate", tables_read(config, layer)):
        outcome, key = run_checkpoint(spark, config, context, spec, run_name, timings, summary)
    docs_started = time.time()
    gx_context.prune_results(context, spec.suite["name"], config.data_docs_results_kept)
    if render_docs:
        gx_context.build_docs(context, since, suites=(spec.suite["name"],))
    if key is not None:
        page = gx_context.docs_page(context, key, rendered=render_docs)
        outcome.data_docs_page = str(page) if page else ""
    timings["data_docs"] = time.time() - docs_started
    return GateResult(
        layer=layer,
        success=outcome.success,
        seconds=time.time() - started,
        checkpoints=[outcome],
        data_docs=str(gx_context.data_docs_index(settings.reports_dir)),
        run_name=run_name,
        timings=timings,
    )


def render_run_docs(settings: Settings, since: datetime, layers: Iterable[str]) -> None:
    """Render, in one Data Docs build, the pages of the validations made since ``since``
    (a run's start) and the suite pages of ``layers``' gates.

    A run's gates leave their pages to this (``run_gate(render_docs=False)``): each
    build renders the docs' index again: a run's Data Docs took 0.73 to 0.96 s as three
    builds, 0.36 to 0.39 s as one (warm cycles, docs/performance.md). Until it ran, a
    gate's kept pass names a page that is not there, so the next run validates that gate
    again (``gate_reuse.load_passed``).
    """
    suites = []
    for layer in layers:
        try:
            suites.append(load_checkpoint(layer).suite["name"])
        except Exception:  # noqa: BLE001 - its gate failed closed on it; nothing to render
            continue
    context = gx_context.open_context(settings.reports_dir)
    gx_context.build_docs(context, since, suites=tuple(suites))
