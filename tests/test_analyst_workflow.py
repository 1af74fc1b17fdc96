"""The README's analyst path after `make run`: `lakehouse run` on the bundled samples, then
`dbt build`, `dbt source freshness` and `dbt docs generate` with the committed profile, then
a query of gold through the same session settings, each its own process as a person would
run them (the three dbt commands share one process, dbt's programmatic runner behind the
`dbt` CLI: each `dbt` process starts its own JVM, and a JVM start-up costs more than the
commands themselves on the sample lake). That session takes no lakehouse lock, as a bare
`dbt` would not: a `lakehouse` command started during its build must be refused. And a
bare `dbt` started beside a pipeline JVM must fail at connection."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pyspark_jobs.config import load_config
from pyspark_jobs.jvm_archive import driver_java_options
from pyspark_jobs.settings import DEFAULT_CONFIG, PROJECT_ROOT
from tests.conftest import DRIVER_JAVA_OPTIONS

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
PROJECT = "cdc_lakehouse"
MART = f"model.{PROJECT}.user_accounts"
CHANGE_LOG = f"model.{PROJECT}.change_log"
GOLD_APPLY = f"exposure.{PROJECT}.gold_apply"

# The analyst's session: dbt's CLI commands in order, then the mart and the gold row
# counts read through the session dbt opened with the committed profile.
ANALYST = """
import json, sys
from dbt.cli.main import dbtRunner
from pyspark.sql import SparkSession

runner = dbtRunner()
commands = {}
for args in (["build"], ["source", "freshness"], ["docs", "generate"]):
    result = runner.invoke([*args, "--profiles-dir", "."])
    statuses = {}
    for r in getattr(result.result, "results", None) or []:
        statuses[r.node.unique_id] = str(r.status)
    commands[" ".join(args)] = {"success": result.success, "statuses": statuses}
spark = SparkSession.builder.getOrCreate()
mart = spark.sql("select * from marts.user_accounts order by user_id").collect()
mart = [r.asDict() for r in mart]
rows = {t: spark.table("gold." + t).count() for t in sys.argv[1:]}
jvm = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions", "")
out = {"commands": commands, "mart": mart, "rows": rows, "jvm": jvm}
print("ANALYST " + json.dumps(out, default=str))
"""


def run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=1200
    )
    assert out.returncode == 0, f"{cmd} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


GOLD_TABLES = [e.table for _, e in load_config(DEFAULT_CONFIG).tables()]


@pytest.fixture(scope="module")
def first_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, str], subprocess.CompletedProcess[str]]:
    """`make run`'s `lakehouse run` on a new lake (the committed config of the bundled
    samples): its environment and its output."""
    root = tmp_path_factory.mktemp("analyst-lake")
    env = {
        **os.environ,
        "LAKEHOUSE_ROOT": str(root),
        "LAKEHOUSE_CONFIG": str(DEFAULT_CONFIG),
        "DBT_TARGET_PATH": str(root / "dbt-target"),
        "DBT_LOG_PATH": str(root / "dbt-logs"),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    out = run([str(BIN / "lakehouse"), "run"], env)
    assert "gold    gold.users" in out.stdout
    return env, out


@pytest.fixture(scope="module")
def lake_env(first_run: tuple[dict[str, str], subprocess.CompletedProcess[str]]) -> dict[str, str]:
    """A lake after `make run`."""
    return first_run[0]


def test_a_run_that_succeeds_logs_no_error(
    first_run: tuple[dict[str, str], subprocess.CompletedProcess[str]],
):
    # A user reads an ERROR line as a failure; the overwrite of gold's pending table
    # (saveAsTable) used to make the embedded metastore log one on every run.
    _, out = first_run
    errors = [s for s in (out.stdout + out.stderr).splitlines() if " ERROR " in s]
    assert errors == [], errors


@dataclass(frozen=True)
class AnalystSession:
    """What the analyst's session printed, and a `lakehouse gold` started while its dbt
    had the metastore open (the session takes no lakehouse lock: a bare dbt), with the
    gold tables' newest commits before the session and after that command."""

    report: dict[str, Any]
    gold_during_dbt: subprocess.CompletedProcess[str]
    gold_before: dict[str, int]
    gold_after: dict[str, int]


@pytest.fixture(scope="module")
def analyst_session(lake_env: dict[str, str]) -> AnalystSession:
    lake = Path(lake_env["LAKEHOUSE_ROOT"])
    before = gold_commits(lake)
    session = start([sys.executable, "-c", ANALYST, *GOLD_TABLES], lake_env)
    try:
        wait_for_line(session, "START sql")  # its session has the metastore open
        gold = attempt([str(BIN / "lakehouse"), "gold"], lake_env)
        after = gold_commits(lake)
    finally:
        rest = session.communicate(timeout=1200)[0]
    assert session.returncode == 0, rest[-3000:]
    (line,) = [s for s in rest.splitlines() if s.startswith("ANALYST ")]
    return AnalystSession(json.loads(line.removeprefix("ANALYST ")), gold, before, after)


@pytest.fixture(scope="module")
def analyst(analyst_session: AnalystSession) -> dict[str, Any]:
    return analyst_session.report


@pytest.mark.timeout(2400)
def test_dbt_build_runs_every_model_and_test_on_the_pipelines_lake(analyst: dict[str, Any]):
    build = analyst["commands"]["build"]
    assert build["success"], build
    statuses = build["statuses"]
    assert statuses.pop(GOLD_APPLY) == "no-op"  # an exposure: documented, not built
    assert set(statuses.values()) <= {"success", "pass"}, statuses
    expected = {
        MART,
        CHANGE_LOG,
        f"test.{PROJECT}.unique_user_accounts_user_id.",  # prefixes: dbt adds a hash
        f"test.{PROJECT}.source_unique_gold_users__record_key.",
        f"test.{PROJECT}.source_not_null_gold_tg_works_at__record_key.",
        f"test.{PROJECT}.unique_change_log_change_id.",
        f"unit_test.{PROJECT}.user_accounts.user_accounts_joins_the_shop_and_the_crm_per_user_id",
    }
    for node in expected:
        assert any(s == node or s.startswith(node) for s in statuses), (node, sorted(statuses))
    # every gold table's key is tested
    for check in ("source_unique_gold_", "source_not_null_gold_"):
        tested = {s.split(check, 1)[1].split("__record_key")[0] for s in statuses if check in s}
        assert tested == set(GOLD_TABLES), check


def test_the_analysts_dbt_jvm_takes_the_driver_flags_of_lakehouse_commands(
    analyst: dict[str, Any], lake_env: dict[str, str]
):
    # The suite gives every JVM it starts C1 alone and Serial (tests/conftest.py); the
    # committed profile passes LAKEHOUSE_DRIVER_JAVA_OPTIONS on to dbt's own session.
    # (`LAKEHOUSE_DRIVER_JAVA_OPTIONS= make test` turns them off: nothing to find then.)
    assert lake_env.get(DRIVER_JAVA_OPTIONS, "") in analyst["jvm"]


def test_the_analyst_script_lets_dbts_jvm_map_the_driver_archive(tmp_path: Path):
    # `make dbt-*` (scripts/analyst_dbt.sh) adds the class-data-sharing archive's flags
    # (none when it is not built) after the analyst's own; Spark substitutes the setting
    # into the query.
    env = {
        **os.environ,
        "LAKEHOUSE_ROOT": str(tmp_path / "lake"),
        "DBT_TARGET_PATH": str(tmp_path / "dbt-target"),
        "DBT_LOG_PATH": str(tmp_path / "dbt-logs"),
        DRIVER_JAVA_OPTIONS: "-Dlakehouse.analyst=1",
    }
    query = "select '${spark.driver.extraJavaOptions}' as flags"
    script = str(PROJECT_ROOT / "scripts" / "analyst_dbt.sh")
    out = run([script, "show", "--inline", query, "--output", "json"], env)
    shown = re.search(r'"flags": "([^"]*)"', out.stdout)
    assert shown is not None, out.stdout[-3000:]
    assert shown.group(1).split() == ["-Dlakehouse.analyst=1", *driver_java_options()]


def test_the_example_mart_joins_shop_and_crm_users(analyst: dict[str, Any]):
    # The samples: the shop has 123 and 124 (125 was created, then deleted), the CRM 123
    # and 125 (124 was created, then deleted); the change log keeps every change: 123 was
    # written twice in each, 124 twice in each, 125 twice in the shop and once in the CRM.
    mart = [{k: v for k, v in row.items() if k != "last_updated_at"} for row in analyst["mart"]]
    assert mart == [
        {"user_id": 123, "shop_name": "Mario", "shop_coins": 300000500, "crm_accounts": 1,
         "crm_coins": 150, "total_coins": 300000650, "in_shop": True, "in_crm": True,
         "changes_captured": 4},
        {"user_id": 124, "shop_name": "Lara Croft", "shop_coins": 42, "crm_accounts": 0,
         "crm_coins": None, "total_coins": 42, "in_shop": True, "in_crm": False,
         "changes_captured": 4},
        {"user_id": 125, "shop_name": None, "shop_coins": None, "crm_accounts": 1,
         "crm_coins": 0, "total_coins": 0, "in_shop": False, "in_crm": True,
         "changes_captured": 3},
    ]  # fmt: skip
    assert all(row["last_updated_at"] for row in analyst["mart"])


def test_freshness_on_the_update_time_warns_only_for_empty_tables(
    analyst: dict[str, Any], lake_env: dict[str, str]
):
    freshness = analyst["commands"]["source freshness"]
    assert freshness["success"], freshness
    statuses = {k.rsplit(".", 1)[-1]: v for k, v in freshness["statuses"].items()}
    rows = analyst["rows"]
    assert statuses == {t: "pass" if rows[t] else "warn" for t in GOLD_TABLES}
    assert rows["users"] and rows["tg_tag"] == 0  # both outcomes are exercised
    sources = json.loads((Path(lake_env["DBT_TARGET_PATH"]) / "sources.json").read_text())
    users = next(r for r in sources["results"] if r["unique_id"].endswith(".gold.users"))
    assert users["criteria"]["warn_after"] == {"count": 24, "period": "hour"}


def test_docs_lineage_runs_from_bronze_through_silver_and_gold_to_the_mart(
    analyst: dict[str, Any], lake_env: dict[str, str]
):
    assert analyst["commands"]["docs generate"]["success"]
    target = Path(lake_env["DBT_TARGET_PATH"])
    manifest = json.loads((target / "manifest.json").read_text())
    parents, children = manifest["parent_map"], manifest["child_map"]

    gold = {f"source.{PROJECT}.gold.{t}" for t in GOLD_TABLES}
    assert gold <= set(manifest["sources"])
    # gold -> mart, and silver -> mart directly (the change counts)
    assert {f"source.{PROJECT}.gold.users", f"source.{PROJECT}.gold.crm_users", CHANGE_LOG} <= set(
        parents[MART]
    )
    assert MART in children[f"source.{PROJECT}.gold.users"]
    # silver -> gold: the PySpark step is the exposure every gold source names
    assert parents[GOLD_APPLY] == [CHANGE_LOG]
    assert GOLD_APPLY in children[CHANGE_LOG]
    for source in gold:
        assert "gold_apply" in manifest["sources"][source]["source_meta"]["produced_by"]
    # bronze -> silver
    ancestors, todo = set(), [CHANGE_LOG]
    while todo:
        for parent in parents[todo.pop()]:
            if parent not in ancestors:
                ancestors.add(parent)
                todo.append(parent)
    assert f"source.{PROJECT}.bronze.cdc_raw" in ancestors
    assert f"model.{PROJECT}.stg_cdc__debezium" in ancestors

    catalog = json.loads((target / "catalog.json").read_text())
    assert "_updated_at" in {
        c.lower() for c in catalog["sources"][f"source.{PROJECT}.gold.users"]["columns"]
    }
    assert list(catalog["nodes"][MART]["columns"])[:2] == ["user_id", "shop_name"]


def test_gold_is_queryable_from_a_new_session(lake_env: dict[str, str]):
    query = (
        "from pyspark_jobs.session import get_spark\n"
        "from pyspark_jobs.settings import Settings\n"
        "spark = get_spark(Settings.from_env())\n"
        "for r in spark.sql('select USER_ID, NAME, COINS from gold.users order by 1').collect():\n"
        "    print(tuple(r))\n"
    )
    out = run([sys.executable, "-c", query], lake_env)
    assert out.stdout.splitlines()[-2:] == ["(123, 'Mario', 300000500)", "(124, 'Lara Croft', 42)"]


def delta_commits(lake: Path) -> dict[str, int]:
    """The newest Delta commit of every table in the lake, read off its log."""
    return {
        str(log.parent.relative_to(lake)): max(int(p.stem) for p in log.glob("*.json"))
        for log in (lake / "warehouse").rglob("_delta_log")
    }


def gold_commits(lake: Path) -> dict[str, int]:
    """``delta_commits`` of the gold tables (an analyst's dbt run writes silver's)."""
    return {table: v for table, v in delta_commits(lake).items() if "gold.db" in table}


def start(cmd: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """``cmd`` in the background from the repo root, its output (stderr too) on a pipe."""
    return subprocess.Popen(
        cmd, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def attempt(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``cmd`` from the repo root, whatever its exit code."""
    return subprocess.run(
        cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600
    )


def wait_for_line(process: subprocess.Popen[str], marker: str) -> list[str]:
    """The process's output up to the first line holding ``marker``."""
    assert process.stdout is not None
    lines: list[str] = []
    for line in process.stdout:
        lines.append(line)
        if marker in line:
            return lines
    raise AssertionError(f"ended without {marker!r}:\n{''.join(lines[-40:])}")


def stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=180)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


DERBY_BUSY = "Another instance of Derby may have already booted the database"


@pytest.mark.timeout(900)
def test_a_bare_dbt_beside_a_pipeline_jvm_fails_at_connection_and_writes_nothing(
    lake_env: dict[str, str],
):
    # `dbt` without scripts/analyst_dbt.sh takes no lock: Derby itself refuses the second
    # JVM on the lake's metastore, before dbt builds anything.
    lake = Path(lake_env["LAKEHOUSE_ROOT"])
    holder = start([str(BIN / "lakehouse"), "run", "--every", "3600"], lake_env)
    try:
        wait_for_line(holder, "cycle 1: succeeded")
        before = delta_commits(lake)
        out = attempt([str(BIN / "dbt"), "run", "--profiles-dir", "."], lake_env)
        assert out.returncode != 0, out.stdout[-3000:]
        assert DERBY_BUSY in out.stdout + out.stderr, (out.stdout[-3000:], out.stderr[-3000:])
        assert delta_commits(lake) == before
        assert holder.poll() is None  # the pipeline goes on
    finally:
        stop(holder)
    assert holder.returncode == 0


def test_a_pipeline_command_during_a_bare_dbt_run_fails_before_writing(
    analyst_session: AnalystSession,
):
    # The analyst's session is the bare dbt: `lakehouse gold` started while its `dbt build`
    # ran is refused before its JVM starts, naming the cause, as when a lakehouse command
    # holds the metastore; the session's dbt commands all succeed (their fixture says so).
    gold = analyst_session.gold_during_dbt
    assert gold.returncode == 3, (gold.stdout[-3000:], gold.stderr[-3000:])
    assert gold.stderr.startswith("lakehouse: the lake's embedded metastore ("), gold.stderr
    assert "is open in another process that holds no lakehouse lock" in gold.stderr
    assert "Derby" not in gold.stderr.replace("embedded Derby metastore", "")
    assert gold.stdout == ""
    assert analyst_session.gold_after == analyst_session.gold_before
