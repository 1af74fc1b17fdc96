"""A gate whose inputs are as they were when it last passed is not validated again in a
run (quality/gate_reuse.py); any write to a table it reads, a failure, a changed
definition or config, and ``lakehouse validate`` all validate.

One good pipeline run for the module (two of the sample sources); the tests run in file
order and build on each other.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

from pyspark_jobs.config import LakehouseConfig, load_config
from pyspark_jobs.delta_log import latest_version
from pyspark_jobs.gold.tables import TOMBSTONES_TABLE
from pyspark_jobs.quality import frames, gate_reuse, gates
from pyspark_jobs.quality.definitions import EXPECTATIONS_DIR, LAYERS, load_checkpoint
from pyspark_jobs.run_summary import RunSummary, format_summary, is_idle, run_id_of
from pyspark_jobs.settings import Settings
from pyspark_jobs.small_inputs import THRESHOLD_KEY
from tests.conftest import copy_of_samples, reset_lake
from tests.quality.support import cli, latest_run, report_text, run_logged
from tests.silver.landing import NEW_USER, record, write_lines
from tests.support.query_plans import leaves

pytestmark = pytest.mark.slow

NOT_AGAIN = (
    "{layer} gate: nothing it checks changed since run {run}: passed then, not validated again"
)


# A table's version before a test broke it, for the repair of a later test.
GOOD: dict[str, int] = {}


# Run summaries the lake keeps: fewer than this module's runs, so a gate is reused from a
# run whose summary is gone (the reuse record, not the summary, is what it reads).
SUMMARIES_KEPT = 2


@pytest.fixture(scope="module")
def sample_config(tmp_path_factory: pytest.TempPathFactory) -> LakehouseConfig:
    config = copy_of_samples(
        tmp_path_factory.mktemp("reuse"), {"shop_debezium", "inventory_cassandra"}
    )
    raw = yaml.safe_load(config.path.read_text())
    raw["quality"]["run_summaries_kept"] = SUMMARIES_KEPT
    config.path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return load_config(config.path)


@pytest.fixture(scope="module")
def first_run(spark: SparkSession, settings: Settings, sample_config: LakehouseConfig) -> dict:
    reset_lake(spark, settings)
    code, output = run_logged(spark, settings, sample_config)
    assert code == 0, output
    for layer in LAYERS:
        assert f"{layer} gate: validating" in output
    return latest_run(settings)


def validated(gate: dict) -> bool:
    """A gate that ran GX in its run: no reuse, its own summary query and validation."""
    return not gate.get("reused_from") and {"summary", "validation"} <= set(gate["timings"])


def test_the_first_run_validates_and_keeps_each_passed_gate(first_run, settings: Settings):
    for layer in LAYERS:
        gate = first_run["gates"][layer]
        assert gate["success"] and validated(gate)
        kept = json.loads(gate_reuse.record_path(settings, layer).read_text())
        assert kept["result"] == gate
        assert kept["inputs"]["layer"] == layer


def test_a_second_run_with_nothing_new_reuses_every_gate(
    first_run, spark: SparkSession, settings: Settings, sample_config: LakehouseConfig
):
    code, output = run_logged(spark, settings, sample_config)

    assert code == 0, output
    run = latest_run(settings)
    first = first_run["run_id"]
    assert run["status"] == "succeeded" and run["run_id"] != first
    for layer in LAYERS:
        assert NOT_AGAIN.format(layer=layer, run=first) in output
        assert f"{layer} gate: validating" not in output
        gate, before = run["gates"][layer], first_run["gates"][layer]
        assert gate["success"] and gate["reused_from"] == first
        assert gate["run_name"] == run["run_id"]
        # its checks are the first run's, Data Docs page included
        assert gate["checkpoints"] == before["checkpoints"]
        assert Path(gate["checkpoints"][0]["data_docs_page"]).is_file()
        # the time spent deciding, kept as the gate's time
        assert set(gate["timings"]) == {"inputs"}
        assert run["timings"][f"{layer} gate"] == gate["seconds"] < before["seconds"]
    printed = format_summary(RunSummary(**run))
    for layer in LAYERS:
        line = next(x for x in printed.splitlines() if x.startswith(f"  gate    {layer} "))
        assert "passed" in line
        assert line.endswith(f"not validated: nothing it checks changed since run {first}")
    page = report_text(settings)
    assert page.count("Not validated again in this run") == 3
    assert f"changed since run <strong>{first}</strong>" in page
    assert f"(of run {first})" in page
    # a run that changed nothing is saved under a name that says so (the report's trend
    # counts such runs by name, without reading them)
    runs = settings.state_dir / "runs"
    assert (runs / f"{run['run_id']}.idle.json").is_file()
    assert (runs / f"{first}.json").is_file()


def test_a_commit_to_a_gold_table_validates_the_gold_gate_again(
    first_run, spark: SparkSession, settings: Settings, sample_config: LakehouseConfig
):
    # A Delta commit that changes no row: the gate cannot know that, so it validates.
    spark.sql("alter table gold.users set tblproperties ('lakehouse.test' = 'touched')")

    code, output = run_logged(spark, settings, sample_config)

    assert code == 0, output
    gates = latest_run(settings)["gates"]
    assert gates["bronze"]["reused_from"] == gates["silver"]["reused_from"] == first_run["run_id"]
    gold = gates["gold"]
    assert validated(gold) and gold["success"]
    # Only gold.users changed: its row is counted again, the others' are the first run's.
    first = first_run["run_id"]
    tables = len(list(sample_config.tables()))
    assert f"gold gate: validating; 1 of {tables} tables changed since run {first}" in output
    assert gold["recounted"] == ["gold.users"] and gold["rows_from"] == first
    assert gold["checkpoints"][0]["rows"] == whole_gold_summary(spark, sample_config)
    printed = format_summary(RunSummary(**latest_run(settings)))
    assert f"counted again: 1 changed tables; the others' rows from run {first}" in printed
    assert f"Only 1 table(s) changed since run <strong>{first}</strong>" in report_text(settings)


def whole_gold_summary(spark: SparkSession, config: LakehouseConfig) -> list[dict]:
    """The gold gate's summary rows as a validation of every table computes them."""
    rows, _ = gates.summary_rows(spark, config, load_checkpoint("gold"))
    return rows


def test_a_changed_tombstone_counts_its_table_again(
    first_run, spark: SparkSession, settings: Settings, sample_config: LakehouseConfig
):
    # A write to the shared tombstone table that changes one table's tombstones only.
    name = spark.table(TOMBSTONES_TABLE).select("table_name").first()[0]
    tombstones = latest_version(spark, TOMBSTONES_TABLE)
    spark.sql(f"delete from {TOMBSTONES_TABLE} where table_name = '{name}'")

    code, output = run_logged(spark, settings, sample_config)

    assert code == 0, output
    gold = latest_run(settings)["gates"]["gold"]
    assert validated(gold) and gold["success"]
    assert gold["recounted"] == [f"gold.{name}"]
    assert gold["checkpoints"][0]["rows"] == whole_gold_summary(spark, sample_config)
    spark.sql(f"restore table {TOMBSTONES_TABLE} to version as of {tombstones}")


def test_a_hand_edit_that_breaks_a_check_fails_the_gold_gate(
    first_run, spark: SparkSession, settings: Settings, sample_config: LakehouseConfig
):
    GOOD["gold.users"] = latest_version(spark, "gold.users")
    spark.sql("update gold.users set USER_ID = null where USER_ID = 123")

    code, output = run_logged(spark, settings, sample_config)

    assert code == 1
    gold = latest_run(settings)["gates"]["gold"]
    assert validated(gold) and not gold["success"]
    assert "gold.tables: null_key_columns = 0, observed gold.users=1 (USER_ID)" in output
    assert not gate_reuse.record_path(settings, "gold").exists()


def test_a_failed_gate_is_validated_again_though_nothing_changed(
    first_run, spark: SparkSession, settings: Settings, sample_config: LakehouseConfig
):
    code, output = run_logged(spark, settings, sample_config)

    assert code == 1
    gold = latest_run(settings)["gates"]["gold"]
    assert validated(gold) and not gold["success"]
    assert "gold gate: validating" in output and "gold gate FAILED" in output


def test_lakehouse_validate_always_validates(
    first_run, spark: SparkSession, settings: Settings, sample_config: LakehouseConfig
):
    # the bronze gate's inputs are unchanged since the first run: a run would reuse it
    assert cli(settings, sample_config.path, "validate", "--layer", "bronze") == 0
    bronze = latest_run(settings)["gates"]["bronze"]
    assert validated(bronze) and bronze["success"]
    assert gate_reuse.record_path(settings, "bronze").exists()
    # the operator's repair, then validate: validated, and the run after it validates too
    # (validate keeps nothing, the repair is a commit)
    spark.sql(f"restore table gold.users to version as of {GOOD['gold.users']}")
    assert cli(settings, sample_config.path, "validate", "--layer", "gold") == 0
    assert validated(latest_run(settings)["gates"]["gold"])
    code, output = run_logged(spark, settings, sample_config)
    assert code == 0, output
    gates = latest_run(settings)["gates"]
    assert validated(gates["gold"]) and gates["gold"]["success"]
    assert gates["silver"]["reused_from"] == first_run["run_id"]
    # each run and validate wrote a summary; the newest SUMMARIES_KEPT of those that
    # changed something are left (and of those that changed nothing, counted apart)
    saved = sorted((settings.state_dir / "runs").glob("*.json"))
    runs = [run_id_of(p) for p in saved if not is_idle(p)]
    assert len(runs) == SUMMARIES_KEPT and runs[-1] == latest_run(settings)["run_id"]
    assert first_run["run_id"] not in runs


def test_a_failed_validate_drops_the_kept_pass(
    first_run, spark: SparkSession, settings: Settings, sample_config: LakehouseConfig
):
    assert gate_reuse.record_path(settings, "gold").exists()
    good = latest_version(spark, "gold.users")
    duplicate = spark.table("gold.users").where("USER_ID = 124")
    duplicate.write.format("delta").mode("append").saveAsTable("gold.users")
    assert cli(settings, sample_config.path, "validate", "--layer", "gold") == 1
    assert not gate_reuse.record_path(settings, "gold").exists()
    spark.sql(f"restore table gold.users to version as of {good}")


def test_the_inputs_name_every_table_the_frames_read(
    first_run, spark: SparkSession, sample_config: LakehouseConfig
):
    # Nothing read ahead (``snapshots.read_tables``), so the plan names every table read.
    spark.conf.set(THRESHOLD_KEY, "0")
    try:
        plans = {
            layer: frames.build_frame(spark, sample_config, load_checkpoint(layer))
            ._jdf.queryExecution()
            .analyzed()
            .toString()
            for layer in LAYERS
        }
    finally:
        spark.conf.unset(THRESHOLD_KEY)
    for layer, plan in plans.items():
        read = set(re.findall(r"SubqueryAlias spark_catalog\.(\w+\.\w+)", plan))
        assert read == set(frames.frame_tables(sample_config, layer)), layer
        inputs = gate_reuse.gate_inputs(spark, sample_config, layer)
        assert set(inputs["tables"]) == set(frames.tables_read(sample_config, layer))
    assert gate_reuse.table_versions(spark, ["gold.no_such_table"]) == {
        "gold.no_such_table": gate_reuse.MISSING
    }


def test_a_changed_config_definition_or_code_changes_the_inputs(
    first_run, spark: SparkSession, sample_config: LakehouseConfig, tmp_path: Path
):
    inputs = gate_reuse.gate_inputs(spark, sample_config, "silver")
    assert gate_reuse.gate_inputs(spark, sample_config, "silver") == inputs  # stable

    stricter = dataclasses.replace(sample_config, reject_rate_max=0.0)
    assert gate_reuse.config_fingerprint(stricter) != inputs["config"]

    definitions = tmp_path / "expectations"
    shutil.copytree(EXPECTATIONS_DIR, definitions)
    assert gate_reuse.definitions_fingerprint("silver", definitions) == inputs["definitions"]
    suite = definitions / "suites" / "silver.sources.json"
    suite.write_text(suite.read_text().replace('"unaccounted"', '"rejected"', 1))
    assert gate_reuse.definitions_fingerprint("silver", definitions) != inputs["definitions"]

    code = tmp_path / "project"
    for pattern in gate_reuse.CODE_FILES:
        for file in gate_reuse.PROJECT_ROOT.glob(pattern):
            target = code / file.relative_to(gate_reuse.PROJECT_ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(file, target)
    assert gate_reuse.code_fingerprint(code) == inputs["code"]
    frames_copy = code / "pyspark_jobs" / "quality" / "frames.py"
    frames_copy.write_text(frames_copy.read_text() + "\n# changed\n")
    assert gate_reuse.code_fingerprint(code) != inputs["code"]


def whole_summary(spark: SparkSession, config: LakehouseConfig, layer: str) -> list[dict]:
    """A gate's summary rows as a validation of every table or source computes them."""
    rows, _ = gates.summary_rows(spark, config, load_checkpoint(layer))
    return rows


def test_new_records_of_one_source_count_only_that_source_again(
    first_run, spark: SparkSession, settings: Settings, sample_config: LakehouseConfig
):
    landing = next(s.landing for s in sample_config.sources if s.name == "shop_debezium")
    assert landing is not None
    user = record("shop.public.users", 900, {"USER_ID": 990}, NEW_USER)
    write_lines(landing / "more.jsonl", [user])

    code, output = run_logged(spark, settings, sample_config)

    assert code == 0, output
    run, first = latest_run(settings), first_run["run_id"]
    for layer in ("bronze", "silver"):
        gate = run["gates"][layer]
        assert validated(gate) and gate["success"], layer
        # Only the Debezium source's partitions were appended to: its row is counted
        # again, the Cassandra source's is the first run's, and both are what a whole
        # count gives.
        assert gate["recounted"] == ["shop_debezium"] and gate["rows_from"] == first
        assert f"{layer} gate: validating; 1 of 2 sources changed since run {first}" in output
        assert gate["checkpoints"][0]["rows"] == whole_summary(spark, sample_config, layer)
    printed = format_summary(RunSummary(**run))
    assert f"counted again: 1 changed sources; the others' rows from run {first}" in printed
    assert f"Only 1 source(s) changed since run <strong>{first}</strong>" in report_text(settings)
    # The recount reads the Debezium source's partitions of each table, nothing else.
    for layer in ("bronze", "silver"):
        spec = load_checkpoint(layer)
        frame = frames.source_frame(spark, sample_config, spec, ["shop_debezium"])
        scans = [n.toString() for n in leaves(frame) if n.nodeName().startswith("Scan parquet")]
        assert len(scans) == len(frames.frame_tables(sample_config, layer)), scans
        for scan in scans:
            assert re.search(r"PartitionFilters: \[[^\]]*shop_debezium", scan), scan


def test_a_rewrite_of_a_table_counts_every_source_again(
    first_run, spark: SparkSession, settings: Settings, sample_config: LakehouseConfig
):
    # Not an append (Delta rewrites the files): which sources changed is not told by the
    # files' partitions alone, so every source is counted.
    spark.sql("update silver.change_log set seq = seq where source = 'inventory_cassandra'")

    code, output = run_logged(spark, settings, sample_config)

    assert code == 0, output
    gates = latest_run(settings)["gates"]
    assert gates["bronze"]["reused_from"]
    silver = gates["silver"]
    assert validated(silver) and silver["success"]
    assert silver["recounted"] == [] and not silver["rows_from"]
    assert "silver gate: validating\n" in output


def test_a_reject_of_one_source_counts_only_that_source_again(
    first_run, spark: SparkSession, settings: Settings, sample_config: LakehouseConfig
):
    # A batch with a reject appends to silver.change_log_rejects, partitioned by source as
    # bronze and the change log are: its source is the only one counted again. (Before
    # the rejects were partitioned, any reject counted every source.)
    code, output = run_logged(spark, settings, sample_config)
    assert code == 0, output
    previous = gate_reuse.load_record(settings, "silver")
    assert previous is not None
    spark.sql(
        "insert into silver.change_log_rejects by name "
        "select source, format, entity, 'a reject written by the test' as reject_reason, "
        "position, lineage from silver.change_log where source = 'inventory_cassandra' limit 1"
    )
    inputs = gate_reuse.gate_inputs(spark, sample_config, "silver")
    tables = frames.frame_tables(sample_config, "silver")
    assert frames.REJECTS in tables
    assert gate_reuse.sources_to_recount(spark, previous, inputs, tables) == ["inventory_cassandra"]
