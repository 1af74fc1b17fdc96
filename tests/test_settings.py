"""Settings from outside: lake roots as folders or URIs, Spark settings passed through."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pyspark_jobs.cli import Context, build_parser
from pyspark_jobs.jars import PACKAGES, local_jars, packages_conf
from pyspark_jobs.session import HMS_RETRIES, METASTORE_URL, spark_conf
from pyspark_jobs.settings import DEFAULT_CONFIG, Settings, SettingsError

LAKEHOUSE = [sys.executable, "-m", "pyspark_jobs.cli"]


def test_settings_are_still_built_positionally_with_a_folder():
    settings = Settings("relative/lake", "local[2]", DEFAULT_CONFIG)
    assert settings.lake_root == Path("relative/lake").resolve()
    assert settings.warehouse_dir == str(Path("relative/lake/warehouse").resolve())
    assert settings.local_dir == settings.lake_root
    assert settings.lock_mode == "host"


@pytest.mark.parametrize(
    ("root", "warehouse", "checkpoints", "local_dir"),
    [
        (
            "file:///srv/lake/",
            "file:///srv/lake/warehouse",
            "file:///srv/lake/checkpoints",
            "/srv/lake",
        ),
        (
            "s3a://bucket/teams/lake",
            "s3a://bucket/teams/lake/warehouse",
            "s3a://bucket/teams/lake/checkpoints",
            str(Path(__file__).resolve().parents[1] / "lake-local"),
        ),
        (
            "abfss://lake@account.dfs.core.windows.net/",
            "abfss://lake@account.dfs.core.windows.net/warehouse",
            "abfss://lake@account.dfs.core.windows.net/checkpoints",
            str(Path(__file__).resolve().parents[1] / "lake-local"),
        ),
    ],
)
def test_a_uri_lake_root_stays_a_uri(root, warehouse, checkpoints, local_dir):
    settings = Settings.from_env({"LAKEHOUSE_ROOT": root})
    assert settings.warehouse_dir == warehouse
    assert settings.checkpoint_dir == checkpoints
    assert str(settings.local_dir) == local_dir
    assert settings.lock_mode == "lake"
    assert settings.lock_table_location == checkpoints.replace("checkpoints", "_state/lake_locks")
    assert spark_conf(settings)["spark.sql.warehouse.dir"] == warehouse


def test_no_folder_named_after_the_scheme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    settings = Settings.from_env({"LAKEHOUSE_ROOT": "s3a://bucket/lake"})
    assert "s3a:" not in str(settings.local_dir)
    assert not (tmp_path / "s3a:").exists()


def test_a_relative_file_uri_is_refused():
    with pytest.raises(SettingsError, match="absolute path"):
        Settings.from_env({"LAKEHOUSE_ROOT": "file:lake"})


def test_spark_defaults_file_then_conf_flags_win_over_the_project(tmp_path: Path):
    defaults = tmp_path / "spark-defaults.conf"
    defaults.write_text(
        "# comment\n"
        "spark.executor.memory   4g\n"
        "spark.sql.shuffle.partitions=64\n"
        "spark.hadoop.javax.jdo.option.ConnectionPassword ${METASTORE_PW}\n"
    )
    env = {"LAKEHOUSE_ROOT": str(tmp_path / "lake"), "LAKEHOUSE_SPARK_DEFAULTS": str(defaults)}
    env["METASTORE_PW"] = "s3cret"
    settings = Settings.from_env(env).with_overrides(conf=["spark.sql.shuffle.partitions=8"])
    conf = spark_conf(settings)
    assert conf["spark.executor.memory"] == "4g"
    assert conf["spark.sql.shuffle.partitions"] == "8"
    assert conf["spark.hadoop.javax.jdo.option.ConnectionPassword"] == "s3cret"
    # the project's own settings stay where nobody overrides them
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"


def test_only_the_embedded_metastore_gives_up_at_its_first_failure():
    # Derby admits one JVM: Hive's retries only delay the error a bare `dbt` beside a
    # pipeline command gets (80 s instead of 22). A shared metastore keeps them.
    embedded = spark_conf(Settings.from_env({}))
    assert embedded[HMS_RETRIES] == "1"
    shared = Settings.from_env({}).with_conf([(METASTORE_URL, "jdbc:postgresql://db/hive")])
    assert HMS_RETRIES not in spark_conf(shared)
    chosen = shared.with_conf([(HMS_RETRIES, "3")])
    assert spark_conf(chosen)[HMS_RETRIES] == "3"


def test_a_secret_missing_from_the_environment_names_the_line(tmp_path: Path):
    defaults = tmp_path / "spark-defaults.conf"
    defaults.write_text("spark.a 1\nspark.hadoop.x ${NOT_SET_ANYWHERE}\n")
    with pytest.raises(SettingsError, match=rf"{defaults}:2: .*NOT_SET_ANYWHERE is not set"):
        Settings.from_env({"LAKEHOUSE_SPARK_DEFAULTS": str(defaults)})


def test_embedded_sessions_take_the_resolved_jars_and_clusters_the_coordinates():
    settings = Settings.from_env({})
    assert spark_conf(settings)["spark.jars"].split(",") == local_jars()
    assert {Path(j).name.split("_", 1)[0] for j in local_jars()} >= {"io.delta", "org.postgresql"}
    cluster = spark_conf(settings.with_conf(packages_conf().items()))
    assert "spark.jars" not in cluster
    assert cluster["spark.jars.packages"] == ",".join(PACKAGES)


def test_cli_flags_reach_the_settings(tmp_path: Path):
    defaults = tmp_path / "defaults.conf"
    defaults.write_text("spark.executor.cores 3\n")
    args = build_parser().parse_args(
        [
            "--lake-root",
            "file:///srv/lake",
            "--spark-defaults",
            str(defaults),
            "--conf",
            "spark.executor.cores=5",
            "--conf",
            "spark.driver.extraClassPath=/a=b",
            "--dbt-target",
            "thrift",
            "gold",
        ]
    )
    settings = Context(args).settings
    assert settings.lake_root == "file:///srv/lake"
    assert settings.dbt_target == "thrift"
    assert spark_conf(settings)["spark.executor.cores"] == "5"
    assert spark_conf(settings)["spark.driver.extraClassPath"] == "/a=b"


def test_a_bad_conf_flag_is_one_line_and_exit_2(tmp_path: Path):
    out = subprocess.run(
        [*LAKEHOUSE, "--lake-root", str(tmp_path), "--conf", "executor.cores", "gold"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "lakehouse: settings error: --conf: expected spark.KEY=VALUE, got 'executor.cores'"
    )


def test_a_lake_root_that_is_or_lies_under_a_file_is_refused(tmp_path: Path):
    file = tmp_path / "not-a-folder"
    file.write_text("x")
    with pytest.raises(SettingsError, match=r"expected a folder, it is a file$"):
        Settings.from_env({"LAKEHOUSE_ROOT": str(file)})
    with pytest.raises(SettingsError, match=f"expected a folder, {file} is a file$"):
        Settings.from_env({"LAKEHOUSE_ROOT": f"file://{file}/lake"})
    assert Settings.from_env({"LAKEHOUSE_ROOT": str(tmp_path / "new" / "lake")}).lake_root == (
        tmp_path / "new" / "lake"
    )
