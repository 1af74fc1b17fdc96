"""The silver and gold gates on the samples: pass on good data, stop the run on bad data.

One good pipeline run for the module (two of the sample sources); the tests then break
one layer at a time (a null key in gold, then a duplicate change_id in silver, which the
silver step's dbt tests catch), show the run stops there with exit code 1, names the
failure in its output and in the report, leaves the next layer alone and keeps the
failing layer's data. Tests run in file order and build on each other.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.config import LakehouseConfig
from pyspark_jobs.delta_log import latest_version
from pyspark_jobs.settings import Settings
from tests.conftest import copy_of_samples, gold_table_names, reset_lake
from tests.quality.support import cli, latest_run, report_text, run_logged

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sample_config(tmp_path_factory: pytest.TempPathFactory) -> LakehouseConfig:
    """Two of the samples' sources: enough for every gate, at a third of the run time."""
    return copy_of_samples(
        tmp_path_factory.mktemp("gates"), {"shop_debezium", "inventory_cassandra"}
    )


@pytest.fixture(scope="module")
def good_run(
    spark: SparkSession, settings: Settings, sample_config: LakehouseConfig
) -> tuple[int, str]:
    reset_lake(spark, settings)
    return run_logged(spark, settings, sample_config)


def test_samples_pass_every_gate(good_run, settings: Settings, sample_config: LakehouseConfig):
    code, output = good_run
    assert code == 0, output
    run = latest_run(settings)
    assert run["status"] == "succeeded"
    assert {layer: gate["success"] for layer, gate in run["gates"].items()} == {
        "bronze": True,
        "silver": True,
        "gold": True,
    }
    checkpoints = {cp["name"] for gate in run["gates"].values() for cp in gate["checkpoints"]}
    assert checkpoints == {"bronze.sources", "silver.sources", "gold.tables"}
    # every check of every gate records its observed value per source or table
    for gate in run["gates"].values():
        (checkpoint,) = gate["checkpoints"]
        names = {row[checkpoint["index"]] for row in checkpoint["rows"]}
        for check in checkpoint["expectations"]:
            assert check["success"] and check["threshold"], check
            assert set(check["values"]) == names, check
    assert set(run["gates"]["gold"]["checkpoints"][0]["expectations"][0]["values"]) == set(
        gold_table_names(sample_config)
    )
    assert f"report: {settings.reports_dir / 'index.html'}" in output


def test_null_key_in_gold_fails_the_gold_gate(
    good_run, spark: SparkSession, settings: Settings, sample_config: LakehouseConfig, capsys
):
    assert good_run[0] == 0
    users = spark.table("gold.users")
    bad = (
        users.limit(1)
        .withColumn("USER_ID", F.lit(None).cast("bigint"))
        .withColumn("_record_key", F.lit('{"USER_ID":null}'))
    )
    bad.write.format("delta").mode("append").saveAsTable("gold.users")
    capsys.readouterr()

    assert cli(settings, sample_config.path, "validate", "--layer", "gold") == 1
    out = capsys.readouterr().out
    assert "gold.tables: null_key_columns = 0, observed gold.users=1 (USER_ID)" in out

    code, output = run_logged(spark, settings, sample_config)
    assert code == 1
    assert "gold gate FAILED" in output and "gold.users=1 (USER_ID)" in output
    assert latest_run(settings)["status"] == "stopped by the gold gate"
    assert spark.table("gold.users").where(F.col("USER_ID").isNull()).count() == 1
    page = report_text(settings)
    assert "null_key_columns" in page and "USER_ID" in page
    # the operator's repair: the gate passes again
    spark.sql("delete from gold.users where USER_ID is null")
    assert cli(settings, sample_config.path, "validate", "--layer", "gold") == 0


def test_deleted_key_put_back_by_hand_fails_the_gold_gate(
    good_run, spark: SparkSession, settings: Settings, sample_config: LakehouseConfig, capsys
):
    # 125 was created, then deleted (the samples): its tombstone outlives its row.
    assert good_run[0] == 0
    assert spark.table("gold.users").where("USER_ID = 125").count() == 0
    revived = (
        spark.table("gold.users")
        .limit(1)
        .withColumn("USER_ID", F.lit(125).cast("bigint"))
        .withColumn("_record_key", F.lit('{"USER_ID":"125"}'))
        .withColumn("_seq", F.array(F.lit(1700000000000).cast("bigint")))
    )
    revived.write.format("delta").mode("append").saveAsTable("gold.users")
    capsys.readouterr()

    assert cli(settings, sample_config.path, "validate", "--layer", "gold") == 1
    out = capsys.readouterr().out
    assert "gold.tables: deleted_keys_live = 0, observed gold.users=1" in out
    spark.sql("delete from gold.users where USER_ID = 125")
    assert cli(settings, sample_config.path, "validate", "--layer", "gold") == 0


def test_duplicate_change_id_stops_the_run_at_silver(
    good_run, spark: SparkSession, settings: Settings, sample_config: LakehouseConfig
):
    # Nothing new in bronze: the silver step still tests the change log, which was
    # written since its last build.
    assert good_run[0] == 0
    before_gold = {t: latest_version(spark, t) for t in gold_table_names(sample_config)}
    progress_before = spark.table("lakehouse.gold_progress").orderBy("table_name").collect()
    spark.table("silver.change_log").limit(1).write.format("delta").mode("append").saveAsTable(
        "silver.change_log"
    )

    code, output = run_logged(spark, settings, sample_config)

    assert code == 1
    assert "silver dbt tests FAILED; the run stopped before the silver gate:" in output
    failure = (
        "  - unique_change_log_change_id (models/silver/_silver.yml): "
        "Got 1 result, configured to fail if != 0; rows: "
    )
    assert failure in output
    rows_query = Path(output.split(failure, 1)[1].splitlines()[0])
    assert rows_query.is_file() and "change_id" in rows_query.read_text()
    assert f"report: {settings.reports_dir / 'index.html'}" in output
    run = latest_run(settings)
    assert run["status"] == "stopped by the silver dbt tests"
    assert list(run["gates"]) == ["bronze"] and run["gates"]["bronze"]["success"]
    assert "silver" not in run["layers"] and "gold" not in run["layers"]
    # gold untouched: no new table versions, nothing applied from the bad change log
    assert {t: latest_version(spark, t) for t in gold_table_names(sample_config)} == before_gold
    assert spark.table("lakehouse.gold_progress").orderBy("table_name").collect() == progress_before
    # the failing layer's data is still there, duplicate included
    dupes = spark.table("silver.change_log").groupBy("change_id").count().where("count > 1")
    assert dupes.count() == 1
    assert "stopped by the silver dbt tests" in report_text(settings)


def test_the_failed_dbt_test_runs_again_until_silver_is_repaired(
    good_run, settings: Settings, sample_config: LakehouseConfig, capsys
):
    # The failed build was not recorded: `lakehouse silver` tests again and fails again.
    assert cli(settings, sample_config.path, "silver") == 1
    err = capsys.readouterr().err
    assert "DbtTestsFailed" in err and "unique_change_log_change_id" in err
    # The gate counts where bronze records went; the duplicate is the dbt test's to find.
    assert cli(settings, sample_config.path, "validate", "--layer", "silver") == 0
    # The operator's repair for a bad change log: rebuild it from bronze.
    assert cli(settings, sample_config.path, "silver", "--full-refresh") == 0
