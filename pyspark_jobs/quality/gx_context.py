"""The runtime GX context: file-backed, rooted in the lake, rebuilt from the committed files.

Why this split: the suites and checkpoints are reviewed code (``expectations/``), while
validation results and Data Docs are data about one lake. The context therefore lives in
``<lake>/reports/gx`` (GX's own layout: ``gx/uncommitted/validations``,
``gx/uncommitted/data_docs``) and every gate first writes the committed definitions into
it with ``add_or_update``, so the lake's copy can never drift from git and deleting
``<lake>/reports`` loses only history, never a definition. Each gate keeps its newest
results only (``prune_results``).

GX validates each layer's summary frame as a pandas DataFrame: the frame is a handful of
rows (one per source or gold table) that the gate has already collected, so GX's metrics
cost no Spark job at all.
"""

from __future__ import annotations

import datetime
import os
import urllib.parse
from pathlib import Path
from typing import Any

import pandas as pd

from pyspark_jobs.quality.definitions import CheckpointSpec, GateDefinitionError
from pyspark_jobs.quality.offline_docs import make_offline

# GX would otherwise phone home on import; the pipeline runs offline.
os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")

import great_expectations as gx  # noqa: E402
from great_expectations.checkpoint.checkpoint import CheckpointResult  # noqa: E402
from great_expectations.core.expectation_validation_result import (  # noqa: E402
    ExpectationSuiteValidationResult,
)
from great_expectations.core.run_identifier import RunIdentifier  # noqa: E402
from great_expectations.data_context import FileDataContext  # noqa: E402
from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: E402
from great_expectations.data_context.types.resource_identifiers import (  # noqa: E402
    ExpectationSuiteIdentifier,
    ValidationResultIdentifier,
)

DATASOURCE = "lakehouse summaries"
BATCH = "whole frame"


def result_format(index: tuple[str, ...]) -> dict[str, Any]:
    """COMPLETE: every failing row, named by ``index``. Cheap and bounded: the frame has
    one row per source or table, so this is the whole answer, not a sample."""
    fmt: dict[str, Any] = {"result_format": "COMPLETE"}
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


def docs_site_dir(reports_dir: Path) -> Path:
    return reports_dir / "gx" / "uncommitted" / "data_docs" / "local_site"


def data_docs_index(reports_dir: Path) -> Path:
    return docs_site_dir(reports_dir) / "index.html"


def register(context: FileDataContext, spec: CheckpointSpec) -> gx.Checkpoint:
    """Write a committed checkpoint, its validation definition and suite into the context."""
    suite = gx.ExpectationSuite(**{k: v for k, v in spec.suite.items() if k != "id"})
    if len(suite.expectations) != len(spec.suite["expectations"]):
        # GX logs and drops an invalid expectation; a gate must not quietly get weaker.
        raise GateDefinitionError(f"suite {spec.suite['name']}: an expectation is not valid")
    suite = context.suites.add_or_update(suite)
    for store in (context.checkpoint_store, context.validation_definition_store):
        _drop_if_stale(store, spec.name)
    datasource = context.data_sources.add_or_update_pandas(name=DATASOURCE)
    asset_name = spec.asset or spec.name
    try:
        asset = datasource.get_asset(asset_name)
    except LookupError:
        asset = datasource.add_dataframe_asset(name=asset_name)
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
            result_format=result_format(spec.index),
        )
    )


def _drop_if_stale(store: Any, name: str) -> None:
    """Remove a stored definition named ``name`` that no longer loads, e.g. one an older
    gate layout wrote against a data asset that is gone: GX's ``add_or_update`` would
    fail reading it, and the committed definition replaces it anyway."""
    key = store.get_key(name=name)
    if not store.has_key(key):
        return
    try:
        store.get(key)
    except Exception:  # noqa: BLE001 - any definition that does not load is stale
        store.remove_key(key)


def run_checkpoint(
    context: FileDataContext,
    checkpoint: gx.Checkpoint,
    frame: pd.DataFrame,
    parameters: dict[str, Any],
    run_name: str,
    asset: str,
) -> tuple[ValidationResultIdentifier, ExpectationSuiteValidationResult]:
    """Validate ``frame`` as run ``run_name``; the result is stored for Data Docs."""
    result: CheckpointResult = checkpoint.run(
        batch_parameters={"dataframe": frame},
        expectation_parameters=parameters,
        run_id=RunIdentifier(
            run_name=run_name, run_time=datetime.datetime.now(datetime.timezone.utc)
        ),
    )
    ((key, validation),) = result.run_results.items()
    # A dataframe batch has no asset name in its batch spec, so Data Docs would say
    # "Data asset: None": name it and store the result again (same key).
    batch_spec = dict(validation.meta.get("batch_spec") or {})
    batch_spec["data_asset_name"] = asset
    validation.meta["batch_spec"] = batch_spec  # type: ignore[arg-type]
    context.validation_results_store.set(key, validation)
    return key, validation


def build_docs(
    context: FileDataContext,
    since: datetime.datetime | None = None,
    suites: tuple[str, ...] = (),
) -> None:
    """Render Data Docs, then make the pages work offline (``offline_docs``).

    With ``since``: only the results validated after it, the named ``suites`` and the
    index, so a gate's cost does not grow with the lake's history (neither rendering nor
    the offline rewrite); everything when ``since`` is None.
    """
    site = docs_site_dir(Path(str(context.root_directory)).parent)
    if since is None:
        context.build_data_docs()
        make_offline(site)
        return
    fresh = [
        key
        for key in context.validation_results_store.list_keys()
        if isinstance(key, ValidationResultIdentifier)
        and key.run_id.run_time is not None
        and key.run_id.run_time >= since
    ]
    identifiers: list[Any] = [*fresh, *(ExpectationSuiteIdentifier(name) for name in suites)]
    context.build_data_docs(resource_identifiers=identifiers)
    pages = [site / "index.html"]
    pages += [site / "expectations" / f"{Path(*name.split('.'))}.html" for name in suites]
    pages += [page for key in fresh if (page := docs_page(context, key)) is not None]
    make_offline(site, pages)


def prune_results(context: FileDataContext, suite: str, keep: int) -> int:
    """Remove all but the newest ``keep`` stored results of ``suite``, each with its Data
    Docs page; return how many were removed.

    Every validation stores a result and GX lists them all on each build, so without this
    a continuous run's gates cost more the longer it runs. A gate reused from a removed
    result validates again (``gate_reuse.load_passed`` wants its page), so removing one
    never makes a verdict stale. The page goes first: a cut here leaves a result the next
    pruning finds, never a page nothing lists.
    """
    store = context.validation_results_store
    results = sorted(
        (
            key
            for key in store.list_keys()
            if isinstance(key, ValidationResultIdentifier)
            and key.expectation_suite_identifier.name == suite
        ),
        key=_validated_at,
        reverse=True,
    )
    stale = results[keep:]
    for key in stale:
        page = docs_page(context, key)
        if page is not None:
            page.unlink(missing_ok=True)
        store.remove_key(key)
    # Each result and page sits in folders of its run (<suite>/<run name>/<run time>/),
    # which GX's remove_key leaves behind (its rrmdir never removes one): without this
    # the empty folders, and GX's walks over them, would still grow with uptime.
    suite_path = Path(*suite.split("."))
    root = Path(str(context.root_directory))
    pages_root = docs_site_dir(root.parent) / "validations"
    results_root = root / "uncommitted" / "validations"
    for folder in (results_root / suite_path, pages_root / suite_path):
        _remove_empty_folders(folder)
    return len(stale)


def _validated_at(key: ValidationResultIdentifier) -> datetime.datetime:
    run_time = key.run_id.run_time
    return run_time or datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)


def _remove_empty_folders(root: Path) -> None:
    """Remove every empty folder under ``root`` (deepest first; ``root`` stays)."""
    for folder, _, _ in os.walk(root, topdown=False):
        if Path(folder) != root and not any(Path(folder).iterdir()):
            Path(folder).rmdir()


def docs_page(
    context: FileDataContext, key: ValidationResultIdentifier, rendered: bool = True
) -> Path | None:
    """The Data Docs page of one validation result, if it has been rendered (or, with
    ``rendered=False``, where the next build of the docs renders it)."""
    for site in context.get_docs_sites_urls(resource_identifier=key, only_if_exists=rendered):
        url = site.get("site_url")
        if url and url.startswith("file://"):
            return Path(urllib.parse.unquote(urllib.parse.urlparse(url).path))
    return None
