"""Run one layer's gate: every checkpoint of the layer, then one Data Docs build.

A gate fails closed: a failed expectation, a missing table, or a definition that cannot
be loaded all count as a failed gate; the pipeline stops before the next layer.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from pyspark.sql import SparkSession

from pyspark_jobs.config import LakehouseConfig
from pyspark_jobs.errors import describe
from pyspark_jobs.quality import gx_context
from pyspark_jobs.quality.definitions import CheckpointSpec, load_gate
from pyspark_jobs.quality.frames import build_frame
from pyspark_jobs.settings import Settings


@dataclass
class ExpectationOutcome:
    """One expectation's verdict, in words a data engineer reads."""

    expectation: str
    success: bool
    observed: str = ""


@dataclass
class CheckpointOutcome:
    name: str
    success: bool
    expectations: list[ExpectationOutcome] = field(default_factory=list)
    error: str | None = None


@dataclass
class GateResult:
    """A layer's gate: passed or not, what failed, how long it took, where the report is."""

    layer: str
    success: bool
    seconds: float
    checkpoints: list[CheckpointOutcome]
    data_docs: str

    @property
    def failures(self) -> list[str]:
        """``checkpoint: expectation (observed)`` for everything that failed."""
        out = []
        for cp in self.checkpoints:
            if cp.error:
                out.append(f"{cp.name}: {cp.error}")
            out += [
                f"{cp.name}: {e.expectation}" + (f" (observed {e.observed})" if e.observed else "")
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


def _example(value: Any) -> str:
    """One failing value; with index columns GX gives a dict like {source: .., rate: ..}."""
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def _observed(result: dict[str, Any]) -> str:
    """A short text of what the data showed: counts and a few example values."""
    if not result:
        return ""
    if result.get("unexpected_count"):
        examples = (
            result.get("partial_unexpected_index_list")
            or result.get("partial_unexpected_list")
            or []
        )
        shown = ", ".join(_example(v) for v in examples[:5])
        return f"{result['unexpected_count']} unexpected" + (f": {shown}" if shown else "")
    if "observed_value" in result:
        return str(result["observed_value"])
    return ""


def _observed_of(result: Any) -> str:
    """What a failed expectation saw, or the error that kept it from running."""
    if result.success:
        return ""
    info = result.exception_info or {}
    if info.get("raised_exception"):
        return f"error: {str(info.get('exception_message'))[:200]}"
    return _observed(result.result)


def parameters_for(config: LakehouseConfig) -> dict[str, Any]:
    """Suite parameters: the thresholds of config/sources.yml ``quality:``."""
    return {
        "quarantine_rate_max": config.quarantine_rate_max,
        "reject_rate_max": config.reject_rate_max,
    }


def run_checkpoint(
    spark: SparkSession, config: LakehouseConfig, context: Any, spec: CheckpointSpec
) -> CheckpointOutcome:
    """Build the frame, validate it, and summarise; an error fails the checkpoint."""
    try:
        checkpoint = gx_context.register(context, spec)
        frame = build_frame(spark, config, spec).persist()
        try:
            result = gx_context.run_checkpoint(
                checkpoint, frame, parameters_for(config), spec.index
            )
        finally:
            frame.unpersist()
    except Exception as exc:  # noqa: BLE001 - fail closed, with the reason in the report
        return CheckpointOutcome(spec.name, False, error=describe(exc))
    outcomes = [
        ExpectationOutcome(
            describe_expectation(r.expectation_config), bool(r.success), _observed_of(r)
        )
        for r in result.results
    ]
    return CheckpointOutcome(spec.name, bool(result.success), outcomes)


def run_gate(
    spark: SparkSession, settings: Settings, config: LakehouseConfig, layer: str
) -> GateResult:
    """Validate one layer as it is now; results go to the lake's GX context and Data Docs."""
    started = time.time()
    since = datetime.now(timezone.utc)
    try:
        specs = load_gate(layer)
    except Exception as exc:  # noqa: BLE001 - a gate that cannot load fails closed
        outcome = CheckpointOutcome(f"{layer} gate definition", False, error=describe(exc))
        return GateResult(layer, False, time.time() - started, [outcome], "")
    context = gx_context.open_context(settings.reports_dir)
    outcomes = [run_checkpoint(spark, config, context, spec) for spec in specs]
    gx_context.build_docs(context, since)
    return GateResult(
        layer=layer,
        success=all(o.success for o in outcomes),
        seconds=time.time() - started,
        checkpoints=outcomes,
        data_docs=str(gx_context.data_docs_index(settings.reports_dir)),
    )
