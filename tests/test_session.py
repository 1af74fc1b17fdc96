"""The dbt profile and the session factory must describe the same lake."""

from __future__ import annotations

from pathlib import Path

import yaml

from pyspark_jobs.session import spark_conf
from pyspark_jobs.settings import PROJECT_ROOT, Settings

# Settings that only matter to the pipeline's own JVM (set at launch, or test tuning).
PIPELINE_ONLY = {
    "spark.driver.extraJavaOptions",
    "spark.sql.streaming.stopGracefullyOnShutdown",
    "spark.databricks.delta.schema.autoMerge.enabled",
}


def test_profile_uses_the_session_factory_settings():
    profile = yaml.safe_load((PROJECT_ROOT / "profiles.yml").read_text())
    params = profile["cdc_lakehouse"]["outputs"]["local"]["server_side_parameters"]
    lake = Path("/some/lake")
    rendered = {
        k: str(v).replace("{{ env_var('LAKEHOUSE_ROOT', 'lake') }}", str(lake))
        for k, v in params.items()
    }
    # dbt runs from the repo root: the profile names the jars relative to it.
    rendered["spark.jars"] = ",".join(
        str(PROJECT_ROOT / jar) for jar in rendered["spark.jars"].split(",")
    )
    expected = {
        k: v
        for k, v in spark_conf(
            Settings(lake, "local[*]", PROJECT_ROOT / "config" / "sources.yml")
        ).items()
        if k not in PIPELINE_ONLY
    }
    assert rendered == expected


def test_lake_root_defaults_inside_the_repo_and_is_ignored():
    settings = Settings.from_env({})
    assert settings.lake_root == PROJECT_ROOT / "lake"
    assert "lake/" in (PROJECT_ROOT / ".gitignore").read_text().splitlines()
