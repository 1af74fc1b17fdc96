"""One SparkSession for the whole test session, on a throw-away lake."""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

from pyspark_jobs.config import LakehouseConfig, load_config
from pyspark_jobs.gold.tables import gold_table_name
from pyspark_jobs.jvm_archive import driver_java_options
from pyspark_jobs.session import get_spark
from pyspark_jobs.settings import DEFAULT_CONFIG, PROJECT_ROOT, Settings

PIPELINE_DATABASES = ("bronze", "staging", "silver", "gold", "lakehouse")

# Every `lakehouse` command and script the suite starts is a short JVM on a few rows: C1
# alone compiles enough for it, and C2's compiler threads would take most of its CPU
# (measured: test_cli and the bronze kill -9 tests, 193 -> 113 s of CPU, 239 -> 185 s
# wall). The suite's own session (built from Settings below, not from the environment)
# keeps C2: it runs for the whole suite, and crash points plus row apply took 254 -> 362
# s with C1 alone. `LAKEHOUSE_DRIVER_JAVA_OPTIONS= make test` turns this off. C1 alone also
# shrinks the default code cache to 48 MiB, which a silver build filled (`Out of space in
# CodeCache`, the JVM unusable; found by the crash drill, seed 1318925682): the tiered
# default's 240 MiB is kept.
# The garbage collectors: on two busy cores G1's concurrent threads cost CPU the other
# worker needs, so the short JVMs collect with Serial and the suite's own sessions, long
# lived, with Parallel, as a `--every` process does (measured: docs/operations.md, "The
# driver JVM's own flags").
# The analysts' dbt processes the suite starts (the committed profile passes the variable
# on to dbt's own session) also map the class-data-sharing archive `lakehouse` commands
# map by themselves (pyspark_jobs/jvm_archive.py): the analyst's `dbt build`, `source
# freshness` and `docs generate` on the samples' lake, 129 -> 107 s wall and 198 -> 167 s
# of CPU (with C1 and Serial already; 147 s and 275 s with neither).
DRIVER_JAVA_OPTIONS = "LAKEHOUSE_DRIVER_JAVA_OPTIONS"
SHORT_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"
os.environ.setdefault(DRIVER_JAVA_OPTIONS, " ".join([SHORT_JVM_OPTIONS, *driver_java_options()]))


# The longest modules, one test each (the crash drill when selected, then the cluster):
# first in line, so that on `make test`'s two workers they overlap the rest of the suite
# instead of ending it (`--no-loadscope-reorder` keeps this order: xdist would otherwise send the
# modules with the most tests first).
LONGEST = ("tests/drills/", "tests/cluster/")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        starts = [item.nodeid.startswith(folder) for folder in LONGEST]
        return starts.index(True) if any(starts) else len(LONGEST)

    items.sort(key=rank)


@pytest.fixture(scope="session")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Settings of the test lake: a temporary root, few shuffle partitions."""
    root = tmp_path_factory.mktemp("lake")
    os.environ["LAKEHOUSE_ROOT"] = str(root)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # One JVM serves the whole suite: more heap than a single run needs.
    return Settings(
        lake_root=root,
        master="local[2]",
        config_path=DEFAULT_CONFIG,
        shuffle_partitions=2,
        driver_memory="3g",
        long_lived=True,
    )


@pytest.fixture(scope="session")
def spark(settings: Settings) -> Iterator[SparkSession]:
    session = get_spark(settings, app_name="cdc-lakehouse-tests")
    yield session
    session.stop()


def reset_lake(spark: SparkSession, settings: Settings) -> Settings:
    """Empty the shared session's lake: no pipeline tables, checkpoints or run state."""
    for database in PIPELINE_DATABASES:
        spark.sql(f"drop database if exists {database} cascade")
    for folder in (settings.checkpoint_dir, settings.state_dir, settings.reports_dir):
        shutil.rmtree(folder, ignore_errors=True)
    return settings


@pytest.fixture
def empty_lake(spark: SparkSession, settings: Settings) -> Settings:
    """The lake emptied before the test."""
    return reset_lake(spark, settings)


@pytest.fixture(scope="session")
def sample_config() -> LakehouseConfig:
    """The committed config of the bundled samples."""
    return load_config(PROJECT_ROOT / "config" / "sources.yml")


def samples_dir() -> Path:
    return PROJECT_ROOT / "data" / "samples"


def copy_of_samples(folder: Path, sources: Collection[str] | None = None) -> LakehouseConfig:
    """The committed sample config (or only the named ``sources``), written under
    ``folder`` with each landing folder copied there, so a test may land more files."""
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    raw["sources"] = [s for s in raw["sources"] if sources is None or s["name"] in sources]
    for source in raw["sources"]:
        copy = folder / "landing" / source["name"]
        shutil.copytree(PROJECT_ROOT / source["landing"], copy)
        source["landing"] = str(copy)
    path = folder / "config" / "sources.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return load_config(path)


def gold_table_names(config: LakehouseConfig) -> list[str]:
    """``gold.<table>`` of every entity of ``config``, in file order."""
    return [gold_table_name(e) for _, e in config.tables()]
