"""The runtime GX context: file-backed, rooted in the lake, rebuilt from the committed files.

Why this split: the suites and checkpoints are reviewed code (``expectations/``), while
validation results and Data Docs are data about one lake. The context therefore lives in
``<lake>/reports/gx`` (GX's own layout: ``gx/validations``, ``gx/uncommitted/data_docs``)
and every gate first writes the committed definitions into it with ``add_or_update``, so
the lake's copy can never drift from git and deleting ``<lake>/reports`` loses only
history, never a definition.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame

from pyspark_jobs.quality.definitions import CheckpointSpec, GateDefinitionError

# GX would otherwise phone home on import; the pipeline runs offline.
os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")

import great_expectations as gx  # noqa: E402
from great_expectations.checkpoint.checkpoint import CheckpointResult  # noqa: E402
from great_expectations.core.expectation_validation_result import (  # noqa: E402
    ExpectationSuiteValidationResult,
)
from great_expectations.data_context import FileDataContext  # noqa: E402
from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: E402
from great_expectations.data_context.types.resource_identifiers import (  # noqa: E402
    ValidationResultIdentifier,
)

DATASOURCE = "lakehouse"
BATCH = "whole frame"
# SUMMARY brings back counts and at most 20 example values per expectation: bounded, so no
# expectation collects a table to the driver.
# The verdict is computed with BOOLEAN_ONLY (no example rows: about half the Spark jobs);
# only a failed validation is run again with SUMMARY for counts and at most 10 examples
# per expectation, so no expectation ever collects a table to the driver.
VERDICT_FORMAT: dict[str, Any] = {"result_format": "BOOLEAN_ONLY"}


def detail_format(index: tuple[str, ...]) -> dict[str, Any]:
    """SUMMARY with ``index`` columns naming the failing rows."""
    fmt: dict[str, Any] = {"result_format": "SUMMARY", "partial_unexpected_count": 10}
    if index:
        fmt["unexpected_index_column_names"] = list(index)
    return fmt


def open_context(reports_dir: Path) -> FileDataContext:
    """The lake's GX project (created on first use under ``reports_dir/gx``)."""
    reports_dir.mkdir(parents=True, exist_ok=True)
    context = gx.get_context(mode="file", project_root_dir=str(reports_dir))
    assert isinstance(context, FileDataContext)
    bars = context.variables.progress_bars
    if bars is None or (bars.get("globally") if isinstance(bars, dict) else bars.globally):
        # Progress bars would flood the pipeline's log with one line per metric.
        context.variables.progress_bars = ProgressBarsConfig(globally=False)
        context.variables.save()
    return context


def data_docs_index(reports_dir: Path) -> Path:
    return reports_dir / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"


def register(context: FileDataContext, spec: CheckpointSpec) -> gx.Checkpoint:
    """Write a committed checkpoint, its validation definition and suite into the context."""
    suite = gx.ExpectationSuite(**{k: v for k, v in spec.suite.items() if k != "id"})
    if len(suite.expectations) != len(spec.suite["expectations"]):
        # GX logs and drops an invalid expectation; a gate must not quietly get weaker.
        raise GateDefinitionError(f"suite {spec.suite['name']}: an expectation is not valid")
    suite = context.suites.add_or_update(suite)
    datasource = context.data_sources.add_or_update_spark(name=DATASOURCE, persist=False)
    try:
        asset = datasource.get_asset(spec.name)
    except LookupError:
        asset = datasource.add_dataframe_asset(name=spec.name)
    try:
        batch = asset.get_batch_definition(BATCH)
    except KeyError:
        batch = asset.add_batch_definition_whole_dataframe(BATCH)
    validation = context.validation_definitions.add_or_update(
        gx.ValidationDefinition(name=spec.name, data=batch, suite=suite)
    )
    return context.checkpoints.add_or_update(
        gx.Checkpoint(
            name=spec.name,
            validation_definitions=[validation],
            actions=[],
            result_format=VERDICT_FORMAT,
        )
    )


def run_checkpoint(
    checkpoint: gx.Checkpoint, frame: DataFrame, parameters: dict[str, Any], index: tuple[str, ...]
) -> ExpectationSuiteValidationResult:
    """Validate ``frame``; results are stored in the context for Data Docs.

    A failure is validated again with details (what failed, on which rows), so the
    report says why; both results are kept.
    """
    result: CheckpointResult = checkpoint.run(
        batch_parameters={"dataframe": frame}, expectation_parameters=parameters
    )
    (validation,) = result.run_results.values()
    if validation.success:
        return validation
    (definition,) = checkpoint.validation_definitions
    return definition.run(
        batch_parameters={"dataframe": frame},
        expectation_parameters=parameters,
        result_format=detail_format(index),
    )


def build_docs(context: FileDataContext, since: datetime.datetime | None = None) -> None:
    """Render Data Docs: only the results validated after ``since`` (and the index), so
    a gate's cost does not grow with the lake's history; everything when ``since`` is None."""
    if since is None:
        context.build_data_docs()
        return
    fresh = [
        key
        for key in context.validation_results_store.list_keys()
        if isinstance(key, ValidationResultIdentifier)
        and key.run_id.run_time is not None
        and key.run_id.run_time >= since
    ]
    context.build_data_docs(resource_identifiers=fresh)
