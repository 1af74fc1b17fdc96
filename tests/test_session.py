"""The dbt profile and the session factory must describe the same lake."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import yaml

from pyspark_jobs.cli import Context, build_parser
from pyspark_jobs.session import COLLECTOR, PAGE_SIZE, spark_conf
from pyspark_jobs.settings import PROJECT_ROOT, Settings
from tests import conftest

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
    # An analyst's dbt JVM takes the driver flags the `lakehouse` commands take.
    assert rendered.pop("spark.driver.extraJavaOptions") == (
        "{{ env_var('LAKEHOUSE_DRIVER_JAVA_OPTIONS', '') }}"
    )
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


def test_the_projects_python_udf_runs_from_any_working_directory(tmp_path: Path):
    """The document fold's UDF imports pyspark_jobs in the worker. Started from outside
    the repo (cron starts commands in the home folder) without PYSPARK_PYTHON (only the
    Makefile sets it), the workers ran `python3` from PATH, which could not import it."""
    script = (
        "from pyspark.sql import functions as F\n"
        "from pyspark_jobs.gold.document_patch import document_steps\n"
        "from pyspark_jobs.session import get_spark\n"
        "from pyspark_jobs.settings import Settings\n"
        "spark = get_spark(Settings.from_env())\n"
        "folded = F.udf(lambda: document_steps([]) == [], 'boolean')\n"
        "print('folded:', spark.range(1).select(folded()).first()[0])\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYTHONPATH")} | {
        "LAKEHOUSE_ROOT": str(tmp_path / "lake")
    }
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines()[-1] == "folded: True"


def python_on_a_new_lake(
    script: str, tmp_path: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``script`` in a new Python process (and so a new driver JVM) on a lake of its own,
    with ``env`` added to the environment."""
    return subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "LAKEHOUSE_ROOT": str(tmp_path / "lake"), **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_ending_a_jvm_that_died_already_returns_its_status(tmp_path: Path):
    """A command whose JVM was killed (or ran out of memory) still exits with its own
    code: ending the JVM afterwards must not raise."""
    script = (
        "import signal\n"
        "from pyspark import SparkContext\n"
        "from pyspark_jobs.session import end_jvm, get_spark\n"
        "from pyspark_jobs.settings import Settings\n"
        "get_spark(Settings.from_env()).range(1).count()\n"
        "proc = SparkContext._gateway.proc\n"
        "proc.send_signal(signal.SIGKILL)\n"
        "proc.wait()\n"
        "print('status:', end_jvm(timeout=30))\n"
    )
    out = python_on_a_new_lake(script, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines()[-1] == "status: -9"


def test_a_command_leaves_nothing_in_the_jvms_temp_folder(tmp_path: Path):
    """Hive's metastore client made a ``<session id>_resources`` folder in the JVM's temp
    folder for every JVM and never removed it: one more folder in /tmp per scheduled run
    (hundreds after a day of the test suite)."""
    jvm_tmp = tmp_path / "jvm_tmp"
    jvm_tmp.mkdir()
    script = (
        "from pyspark_jobs.session import get_spark\n"
        "from pyspark_jobs.settings import Settings\n"
        "get_spark(Settings.from_env()).sql('show databases').collect()\n"
    )
    options = f"{os.environ.get(conftest.DRIVER_JAVA_OPTIONS, '')} -Djava.io.tmpdir={jvm_tmp}"
    out = python_on_a_new_lake(script, tmp_path, {conftest.DRIVER_JAVA_OPTIONS: options})
    assert out.returncode == 0, out.stderr[-3000:]
    assert not list(jvm_tmp.glob("*_resources"))
    lake = Settings.from_env({"LAKEHOUSE_ROOT": str(tmp_path / "lake")})
    assert lake.hive_resources_dir.is_dir()


def test_no_runtime_bloom_filter_is_injected_into_a_join(spark):
    # Spark 4.2's runtime Bloom filter on a folded key fails to compile and logs an ERROR
    # with a stack trace in gold's folds (`Expression "java.lang.Long" is not an rvalue`).
    # The size threshold is lowered so this small join would get one if they were on.
    threshold = "spark.sql.optimizer.runtime.bloomFilter.applicationSideScanSizeThreshold"
    spark.conf.set(threshold, "1")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        big = spark.range(1000).selectExpr("cast(id % 10 as string) k", "id v").localCheckpoint()
        small = (
            spark.range(100)
            .selectExpr("cast(id as string) k")
            .groupBy("k")
            .count()
            .where("k = '3'")
        )
        joined = big.join(small, "k")
        assert joined.count() == 100
        assert "might_contain" not in joined._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.conf.unset(threshold)
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")


def test_a_tasks_hash_map_and_a_broadcast_hash_table_take_small_pages(spark):
    # A page per hash map, sized from the heap, was 32 MiB in the suite's driver and
    # 64 MiB for a broadcast's table (built on the driver with a memory manager of its own,
    # configured from the JVM's system properties): gigabytes of pages for a few rows.
    jvm = spark.sparkContext._jvm
    assert jvm.org.apache.spark.SparkEnv.get().memoryManager().pageSizeBytes() == 2 * 1024**2
    assert jvm.org.apache.spark.SparkConf().get(PAGE_SIZE) == "2m"


def test_driver_java_options_from_the_environment_come_after_the_projects_own():
    env = {
        "LAKEHOUSE_ROOT": "/tmp/lake",
        "LAKEHOUSE_DRIVER_JAVA_OPTIONS": " -XX:TieredStopAtLevel=1 ",
    }
    options = spark_conf(Settings.from_env(env))["spark.driver.extraJavaOptions"].split()
    assert options[0] == "-Dderby.stream.error.file=/tmp/lake/derby.log"
    assert options[-1] == "-XX:TieredStopAtLevel=1"
    assert (
        "TieredStopAtLevel"
        not in spark_conf(Settings.from_env({}))["spark.driver.extraJavaOptions"]
    )
    # A cluster's settings name the driver's flags: the environment's are added to those.
    marked = Settings.from_env(env).with_conf([("spark.driver.extraJavaOptions", "-Dmark=1")])
    assert spark_conf(marked)["spark.driver.extraJavaOptions"] == "-Dmark=1 -XX:TieredStopAtLevel=1"


def collectors(arguments: list[str]) -> list[str]:
    return [a for a in arguments if a.startswith("-XX:+Use") and a.endswith("GC")]


def test_a_long_lived_driver_collects_with_parallel_unless_the_environment_names_a_collector():
    def flags(long_lived: bool, options: str = "") -> list[str]:
        env = {"LAKEHOUSE_ROOT": "/tmp/lake", "LAKEHOUSE_DRIVER_JAVA_OPTIONS": options}
        settings = dataclasses.replace(Settings.from_env(env), long_lived=long_lived)
        return spark_conf(settings)["spark.driver.extraJavaOptions"].split()

    assert collectors(flags(False)) == []
    assert collectors(flags(True)) == [COLLECTOR]
    assert collectors(flags(True, "-Xss4m")) == [COLLECTOR]
    for named in ("-XX:+UseSerialGC", "-XX:+UseG1GC", "-XX:+UseZGC"):
        for long_lived in (False, True):
            chosen = flags(long_lived, f"-Xss4m {named}")
            assert collectors(chosen) == [named]
            assert chosen[-2:] == ["-Xss4m", named]


def test_only_commands_that_keep_running_are_long_lived():
    parser = build_parser()
    for argv, long_lived in [
        (["run"], False),
        (["run", "--every", "5"], True),
        (["ingest"], False),
        (["ingest", "--every", "0"], True),
        (["gold"], False),
        (["validate", "--layer", "gold"], False),
    ]:
        assert Context(parser.parse_args(argv)).settings.long_lived is long_lived, argv


def jvm_arguments(spark) -> list[str]:
    bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    return list(bean.getInputArguments())


def test_commands_the_suite_starts_compile_with_c1_alone_and_its_session_keeps_c2_each_own_gc(
    spark, tmp_path: Path
):
    # tests/conftest.py: short JVMs on a few rows spend most of their CPU in C2; each kind
    # of JVM has the collector that measured cheapest on two busy cores.
    assert "-XX:TieredStopAtLevel=1" not in jvm_arguments(spark)
    assert collectors(jvm_arguments(spark)) == [COLLECTOR]
    script = (
        "from pyspark_jobs.session import get_spark\n"
        "from pyspark_jobs.settings import Settings\n"
        "bean = get_spark(Settings.from_env()).sparkContext._jvm.java.lang.management"
        ".ManagementFactory.getRuntimeMXBean()\n"
        "print('arguments:', ' '.join(bean.getInputArguments()))\n"
    )
    out = python_on_a_new_lake(script, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    arguments = out.stdout.splitlines()[-1].removeprefix("arguments: ").split()
    assert os.environ[conftest.DRIVER_JAVA_OPTIONS].startswith(conftest.SHORT_JVM_OPTIONS)
    assert set(conftest.SHORT_JVM_OPTIONS.split()) <= set(arguments)
    # The JVM started (HotSpot refuses two collectors): Serial replaced the project's.
    assert collectors(arguments) == ["-XX:+UseSerialGC"]
