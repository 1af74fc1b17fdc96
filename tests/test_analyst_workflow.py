"""The README's analyst path, each step its own process as a person would run it:
`lakehouse run`, then `dbt run` / `dbt test` / `dbt docs generate` with the committed
profile, then a query of gold through the same session settings. One sample source keeps
the four JVM start-ups affordable; the formats are covered by the silver and e2e tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pyspark_jobs.settings import PROJECT_ROOT
from tests.conftest import copy_of_samples

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent


def run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, f"{cmd} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def lake_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("analyst-lake")
    config = copy_of_samples(tmp_path_factory.mktemp("analyst-samples"), {"shop_debezium"})
    env = {
        **os.environ,
        "LAKEHOUSE_ROOT": str(root),
        "LAKEHOUSE_CONFIG": str(config.path),
        "DBT_TARGET_PATH": str(root / "dbt-target"),
        "DBT_LOG_PATH": str(root / "dbt-logs"),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    out = run([str(BIN / "lakehouse"), "run"], env)
    assert "gold    gold.users" in out.stdout
    return env


def test_dbt_run_test_and_docs_with_the_committed_profile(lake_env: dict[str, str]):
    dbt = str(BIN / "dbt")
    run([dbt, "run", "--profiles-dir", "."], lake_env)
    tested = run([dbt, "test", "--profiles-dir", "."], lake_env)
    assert "Completed successfully" in tested.stdout
    run([dbt, "docs", "generate", "--profiles-dir", "."], lake_env)
    assert (Path(lake_env["DBT_TARGET_PATH"]) / "catalog.json").is_file()


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
