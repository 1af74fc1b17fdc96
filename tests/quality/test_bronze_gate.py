"""The bronze gate: a quarantine rate over the threshold stops the run before silver;
raising the threshold lets the next run continue from the landed data. Ends with the
report opened in real headless Chromium."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

from pyspark_jobs.config import LakehouseConfig, load_config
from pyspark_jobs.settings import PROJECT_ROOT, Settings
from tests.conftest import reset_lake, samples_dir
from tests.quality.support import latest_run, report_text, run_logged

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = PROJECT_ROOT / "test-artifacts" / "quality"
SOURCE = {
    "name": "shop_debezium",
    "format": "debezium",
    "entities": [
        {
            "name": "shop.users",
            "table": "users",
            "key": ["USER_ID"],
            "columns": {
                "USER_ID": "bigint",
                "TAX_CODE": "string",
                "NAME": "string",
                "COINS": "bigint",
            },
        }
    ],
}


def write_config(folder: Path, landing: Path, quarantine_rate_max: float) -> LakehouseConfig:
    path = folder / "config" / "sources.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump(
            {
                "quality": {"quarantine_rate_max": quarantine_rate_max, "reject_rate_max": 0.01},
                "sources": [{**SOURCE, "landing": str(landing)}],
            }
        )
    )
    return load_config(path)


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Debezium samples plus one line that is not a record."""
    folder = tmp_path_factory.mktemp("bronze_gate")
    files = folder / "landing"
    files.mkdir()
    shutil.copy(samples_dir() / "debezium" / "shop.public.users.jsonl", files)
    (files / "broken.jsonl").write_text("this line is not a Kafka record\n")
    return folder


@pytest.fixture(scope="module")
def strict_run(spark: SparkSession, settings: Settings, landing: Path) -> tuple[int, str]:
    reset_lake(spark, settings)
    return run_logged(spark, settings, write_config(landing, landing / "landing", 0))


def test_quarantine_over_threshold_stops_before_silver(
    strict_run, spark: SparkSession, settings: Settings
):
    code, output = strict_run
    assert code == 1
    assert "bronze gate FAILED" in output
    assert "bronze.reconciliation: expect_column_values_to_be_between(quarantine_rate)" in output
    assert "source=shop_debezium" in output
    run = latest_run(settings)
    assert run["status"] == "stopped by the bronze gate"
    assert list(run["gates"]) == ["bronze"]
    # silver never ran; bronze kept what it landed and what it quarantined
    assert not spark.catalog.tableExists("silver.change_log")
    assert spark.table("bronze.cdc_raw").count() == 7
    assert spark.table("bronze.cdc_quarantine").count() == 1
    assert "quarantine_rate" in report_text(settings)


def test_raised_threshold_lets_the_next_run_continue(
    strict_run, spark: SparkSession, settings: Settings, landing: Path
):
    assert strict_run[0] == 1
    code, output = run_logged(spark, settings, write_config(landing, landing / "landing", 0.5))
    assert code == 0, output
    assert {g: v["success"] for g, v in latest_run(settings)["gates"].items()} == {
        "bronze": True,
        "silver": True,
        "gold": True,
    }
    assert spark.table("bronze.cdc_raw").count() == 7  # nothing landed twice
    assert spark.table("gold.users").count() == 2


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )


@pytest.mark.browser
def test_report_renders_in_headless_chromium(strict_run, settings: Settings, tmp_path: Path):
    assert CHROMIUM.exists(), "run `make setup-test` (scripts/install_chromium.sh)"
    page = settings.reports_dir / "index.html"
    assert page.exists()
    dom = chromium("--dump-dom", page.as_uri(), profile=tmp_path / "profile").stdout
    for layer in ("bronze", "silver", "gold"):
        assert f'id="gate-{layer}"' in dom
    assert "expect_compound_columns_to_be_unique(topic, partition, offset)" in dom
    assert "expect_column_values_to_be_unique(change_id)" in dom
    assert "expect_column_values_to_be_null(null_key_columns)" in dom
    assert "run succeeded" in dom and "stopped by the bronze gate" in dom  # trend of 2 runs
    assert "shop_debezium" in dom
    docs = settings.reports_dir / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"
    docs_dom = chromium("--dump-dom", docs.as_uri(), profile=tmp_path / "profile").stdout
    assert "bronze.reconciliation" in docs_dom and "gold.tables" in docs_dom
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    chromium(
        "--screenshot=" + str(shot),
        "--window-size=1280,1600",
        page.as_uri(),
        profile=tmp_path / "profile",
    )
    assert shot.stat().st_size > 10_000
