"""How the pipeline invokes dbt (pyspark_jobs/silver/dbt_runner.py), read from dbt's own
log. ``dbt parse`` needs no Spark session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pyspark_jobs.catalog import kept_lookup, lookups_kept
from pyspark_jobs.settings import DEFAULT_CONFIG, Settings
from pyspark_jobs.silver.dbt_runner import run_dbt


def test_the_pipelines_dbt_sends_no_usage_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # run_dbt points the profile at its lake; the session's lake comes back afterwards.
    monkeypatch.setenv("LAKEHOUSE_ROOT", os.environ.get("LAKEHOUSE_ROOT", str(tmp_path)))
    # Whatever the user's environment says, the pipeline's invocation decides.
    monkeypatch.setenv("DBT_SEND_ANONYMOUS_USAGE_STATS", "true")
    monkeypatch.delenv("DO_NOT_TRACK", raising=False)
    lake = Settings(lake_root=tmp_path / "lake", master="local[1]", config_path=DEFAULT_CONFIG)

    run_dbt(lake, ["parse"], parse_cache_dir=tmp_path / "cache")

    log = (lake.dbt_dir / "logs" / "dbt.log").read_text()
    assert "'send_anonymous_usage_stats': 'False'" in log
    # dbt still logs its flush of the (empty) event buffer; nothing is queued or sent.
    assert "Sending event" not in log


def test_a_dbt_invocation_drops_the_runs_kept_lookups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dbt may drop or replace any table it builds: what the run kept of the catalog is
    looked up again after it."""
    monkeypatch.setenv("LAKEHOUSE_ROOT", os.environ.get("LAKEHOUSE_ROOT", str(tmp_path)))
    lake = Settings(lake_root=tmp_path / "lake", master="local[1]", config_path=DEFAULT_CONFIG)
    answers = iter(["before dbt", "after dbt"])
    with lookups_kept():
        assert kept_lookup("silver.change_log", "entry", lambda: next(answers)) == "before dbt"
        run_dbt(lake, ["parse"], parse_cache_dir=tmp_path / "cache")
        assert kept_lookup("silver.change_log", "entry", lambda: next(answers)) == "after dbt"
