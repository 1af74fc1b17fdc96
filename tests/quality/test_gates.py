"""Each layer's committed suite on summary rows that pass and rows that fail (real GX, no
Spark): every check records its observed value per row and its threshold, a failure
names the row and what was found, and the Data Docs it writes work offline."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from pyspark_jobs.quality import gx_context
from pyspark_jobs.quality.definitions import GateDefinitionError, load_checkpoint, load_gate
from pyspark_jobs.quality.gates import GateResult, threshold_text, validate_summary

PARAMETERS = {"quarantine_rate_max": 0.01, "reject_rate_max": 0.01}


def bronze_row(source: str, **counts) -> dict:
    row = {
        "source": source,
        "read": 7,
        "quarantined": 0,
        "quarantine_rate": 0.0,
        "null_coordinates": 0,
        "duplicate_positions": 0,
        "duplicate_position_examples": [],
    }
    return row | counts


def silver_row(source: str, **counts) -> dict:
    row: dict = {"source": source, "bronze_records": 7, "changes": 5, "redelivered": 0}
    row |= {"rejected": 0, "noops": 1, "skipped": 1, "unaccounted": 0, "reject_rate": 0.0}
    return row | counts


def gold_row(table: str, **counts) -> dict:
    row: dict = {"table": table, "entity_kind": "row", "schema_differences": None}
    row |= {"rows": 2, "live_rows": 2, "null_record_keys": 0, "null_key_columns": 0}
    row |= {"duplicate_record_keys": 0, "duplicate_keys": 0, "deleted_keys_live": 0}
    row |= {"states_not_applied": 0, "rejected_states": 0, "null_key_column_names": None}
    return row | counts


@pytest.fixture
def context(tmp_path: Path):
    return gx_context.open_context(tmp_path / "reports")


def validate(context, layer: str, rows: list[dict], run_name: str = "run-1"):
    spec = load_checkpoint(layer)
    return validate_summary(context, spec, rows, list(rows[0]), PARAMETERS, run_name)


def checks(outcome) -> dict[str, tuple]:
    return {e.column: (e.success, e.threshold, e.values) for e in outcome.expectations}


def test_bronze_passes_clean_sources_with_every_value_and_threshold(context):
    outcome, _ = validate(context, "bronze", [bronze_row("a"), bronze_row("b")])
    assert outcome.success and outcome.name == "bronze.sources"
    assert checks(outcome) == {
        "quarantine_rate": (True, "≤ 0.01", {"a": 0.0, "b": 0.0}),
        "null_coordinates": (True, "= 0", {"a": 0, "b": 0}),
        "duplicate_positions": (True, "= 0", {"a": 0, "b": 0}),
    }
    assert all(e.check for e in outcome.expectations)  # each has its words for the report


def test_bronze_fails_on_the_source_over_the_quarantine_rate_and_names_duplicates(context):
    rows = [
        bronze_row("a", quarantined=1, quarantine_rate=0.125),
        bronze_row("b", duplicate_positions=1, duplicate_position_examples=["t/0/1"]),
    ]
    outcome, _ = validate(context, "bronze", rows)
    result = GateResult("bronze", outcome.success, 0.1, [outcome], "")
    assert not outcome.success
    assert result.failures == [
        "bronze.sources: quarantine_rate ≤ 0.01, observed a=0.125",
        "bronze.sources: duplicate_positions = 0, observed b=1 (t/0/1)",
    ]
    rate = next(e for e in outcome.expectations if e.column == "quarantine_rate")
    assert (rate.failing, rate.values) == (["a"], {"a": 0.125, "b": 0.0})


def test_silver_passes_when_every_record_is_accounted_for(context):
    outcome, _ = validate(context, "silver", [silver_row("s")])
    assert outcome.success
    # the reconciliation and the reject rate; the change log's row constraints are dbt's
    assert [e.column for e in outcome.expectations] == ["unaccounted", "reject_rate"]
    assert all(e.success and e.values == {"s": 0} for e in outcome.expectations)


def test_silver_fails_on_unaccounted_records_and_a_reject_rate_over_the_threshold(context):
    rows = [silver_row("s", unaccounted=2), silver_row("t", rejected=1, reject_rate=1 / 7)]
    outcome, _ = validate(context, "silver", rows)
    assert not outcome.success
    failed = {e.column: e.failing for e in outcome.expectations if not e.success}
    assert failed == {"unaccounted": ["s"], "reject_rate": ["t"]}


def test_gold_passes_correct_tables_and_fails_on_a_deleted_key_put_back(context):
    outcome, _ = validate(context, "gold", [gold_row("gold.users"), gold_row("gold.orders")])
    assert outcome.success

    rows = [
        gold_row("gold.users", deleted_keys_live=1),
        gold_row("gold.orders", null_key_columns=1, null_key_column_names="ID"),
        gold_row("gold.items", schema_differences="PRICE: declared double, table has string"),
    ]
    outcome, _ = validate(context, "gold", rows)
    assert not outcome.success
    failed = {e.column: e.observed for e in outcome.expectations if not e.success}
    assert failed == {
        "schema_differences": "gold.items=PRICE: declared double, table has string",
        "null_key_columns": "gold.orders=1 (ID)",
        "deleted_keys_live": "gold.users=1",
    }


def test_a_missing_column_fails_closed(context):
    row = bronze_row("a")
    del row["null_coordinates"]
    outcome, _ = validate(context, "bronze", [row])
    assert not outcome.success
    missing = next(e for e in outcome.expectations if e.column == "null_coordinates")
    assert not missing.success and missing.observed.startswith("error:")


def test_thresholds_read_as_bounds():
    def between(low, high):
        return {
            "type": "expect_column_values_to_be_between",
            "kwargs": {"column": "c", "min_value": low, "max_value": high},
        }

    assert threshold_text(between(0, 0), {}) == "= 0"
    assert threshold_text(between(0, {"$PARAMETER": "m"}), {"m": 0.5}) == "≤ 0.5"
    assert threshold_text(between(1, None), {}) == "≥ 1"
    assert threshold_text(between(1, 5), {}) == "between 1 and 5"
    null = {"type": "expect_column_values_to_be_null", "kwargs": {"column": "c"}}
    assert threshold_text(null, {}) == "is null"


def test_one_checkpoint_per_layer_and_a_bad_definition_is_an_error(tmp_path: Path):
    assert [s.name for layer in ("bronze", "silver", "gold") for s in load_gate(layer)] == [
        "bronze.sources",
        "silver.sources",
        "gold.tables",
    ]
    (tmp_path / "suites").mkdir()
    (tmp_path / "gates.yml").write_text(
        "bronze: {checkpoint: b, suite: nope, frame: f, asset: a, index: [source]}\n"
    )
    with pytest.raises(GateDefinitionError, match="nope.json: suite file not found"):
        load_checkpoint("bronze", tmp_path)


def test_data_docs_name_the_run_and_asset_and_fetch_nothing_from_the_network(
    context, tmp_path: Path
):
    since = datetime.now(timezone.utc)
    outcome, key = validate(context, "bronze", [bronze_row("a")])
    gx_context.build_docs(context, since, suites=("bronze.sources",))

    page = gx_context.docs_page(context, key)
    assert page is not None and page.is_file()
    assert "/run-1/" in page.as_posix()
    html = page.read_text()
    assert "bronze.cdc_raw by source" in html  # the data asset, not "None"
    site = gx_context.docs_site_dir(tmp_path / "reports")
    assert (site / "expectations" / "bronze" / "sources.html").is_file()  # suite page
    for html_page in site.rglob("*.html"):
        text = html_page.read_text()
        remote = re.findall(r'<(?:script|link|img)[^>]*(?:src|href)="(?:https?:)?//', text)
        assert remote == [], html_page
        for asset in re.findall(r'<(?:script|link)[^>]*(?:src|href)="([^"#]+)"', text):
            assert (html_page.parent / asset).resolve().is_file(), (html_page, asset)


def test_a_stale_definition_of_an_older_gate_layout_is_replaced(context):
    # An older layout had a checkpoint of the same name on an asset that no longer exists.
    import great_expectations as gx

    old = context.data_sources.add_pandas(name="old layout")
    batch = old.add_dataframe_asset(name="gold.tables").add_batch_definition_whole_dataframe("b")
    suite = context.suites.add(gx.ExpectationSuite(name="old suite"))
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name="gold.tables", data=batch, suite=suite)
    )
    context.checkpoints.add(gx.Checkpoint(name="gold.tables", validation_definitions=[definition]))
    context.data_sources.delete("old layout")

    outcome, _ = validate(context, "gold", [gold_row("gold.users")])
    assert outcome.success and outcome.error is None


def test_pruning_keeps_the_newest_results_of_one_suite_and_removes_the_others_pages(
    context, tmp_path: Path
):
    keys = {}
    for run in ("run-1", "run-2", "run-3", "run-4"):
        keys[run] = validate(context, "bronze", [bronze_row("a")], run)[1]
    silver = validate(context, "silver", [silver_row("a")], "run-1")[1]
    gx_context.build_docs(context)
    pages = {run: gx_context.docs_page(context, key) for run, key in keys.items()}
    assert all(page is not None and page.is_file() for page in pages.values())
    index = gx_context.docs_site_dir(tmp_path / "reports") / "index.html"
    assert "run-2" in index.read_text()

    assert gx_context.prune_results(context, "bronze.sources", keep=2) == 2
    gx_context.build_docs(context, datetime.now(timezone.utc), suites=("bronze.sources",))

    store = context.validation_results_store
    assert sorted(k.run_id.run_name for k in store.list_keys()) == ["run-1", "run-3", "run-4"]
    assert store.has_key(silver)  # another gate's results are its own
    for run in ("run-1", "run-2"):
        assert not store.has_key(keys[run])
        assert not pages[run].exists() and not pages[run].parent.exists(), run
    for run in ("run-3", "run-4"):
        assert pages[run].is_file()
    # nor do the removed results leave their run's folders behind
    results = tmp_path / "reports" / "gx" / "uncommitted" / "validations" / "bronze" / "sources"
    assert sorted(p.name for p in results.iterdir()) == ["run-3", "run-4"]
    listed = index.read_text()
    assert "run-4" in listed and "run-3" in listed and "run-2" not in listed
    assert gx_context.prune_results(context, "bronze.sources", keep=2) == 0
