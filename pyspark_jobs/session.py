"""The one SparkSession factory: every job, the tests and in-process dbt use it."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

from pyspark_jobs import scratch
from pyspark_jobs.jars import local_jars
from pyspark_jobs.jvm_archive import driver_java_options
from pyspark_jobs.settings import Settings

# Settings that say where the JVM packages come from: when the settings given from
# outside name any of them, the project's resolved local jars are not added.
_JAR_SOURCES = ("spark.jars", "spark.jars.packages")
# The garbage collector of a long-lived driver (`--every`): Parallel, for throughput. On
# two cores G1's concurrent threads take CPU from the planning a warm cycle waits on
# (`benchmarks.warm_cycles` on 2026-11-29, the means of three runs each: a cycle of 100
# changes to one table 31.1 -> 27.0 s, one of 1,000 changes over 24 tables 64.3 -> 60.2
# s), while a one-shot `lakehouse run` of the samples from a cold JVM took 4 % longer with
# it (two runs each): it keeps the JVM's default. docs/operations.md has the figures.
COLLECTOR = "-XX:+UseParallelGC"
# HotSpot refuses to start with two collectors named: when the flags from the environment
# name one, the project's is left out.
_NAMES_COLLECTOR = re.compile(r"-XX:\+Use\w*GC\b")

METASTORE_URL = "spark.hadoop.javax.jdo.option.ConnectionURL"
DERBY_URL = "jdbc:derby:;databaseName="
HMS_RETRIES = "spark.hadoop.hive.hmshandler.retry.attempts"
PAGE_SIZE = "spark.buffer.pageSize"


def _wants_collector(settings: Settings) -> bool:
    return settings.long_lived and not _NAMES_COLLECTOR.search(settings.driver_java_options)


def project_conf(settings: Settings) -> dict[str, str]:
    """The project's own Spark settings: the same tables for jobs and dbt, embedded Derby.

    The committed dbt profile (``profiles.yml``) repeats these for analysts' own
    ``dbt run``; ``tests/test_session.py`` keeps the two in step.
    """
    metastore_url = f"{DERBY_URL}{settings.metastore_dir};create=true"
    return {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.warehouse.dir": settings.warehouse_dir,
        METASTORE_URL: metastore_url,
        "spark.sql.catalogImplementation": "hive",
        # Not Hive's default: a new folder in /tmp per JVM, so one per scheduled run.
        "spark.hadoop.hive.downloaded.resources.dir": str(settings.hive_resources_dir),
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        # Read when the JVM starts (the first session of a process): later sessions of
        # the same process share that JVM.
        "spark.driver.memory": settings.driver_memory,
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Delta rebuilds a table's snapshot with this many tasks; the default 50 makes every
        # small table pay for 50 tasks on each read.
        "spark.databricks.delta.snapshotPartitions": "2",
        # Every hash map and sort buffer of a task (an aggregation's, a hash join's table)
        # takes a whole memory page for its first row, and Spark sizes pages from the
        # heap: 32 MiB in the suite's 3 GiB driver. Gold's fold-property test allocated
        # 17 GB of such pages in 150 s, for a few rows each, and its collector kept moving
        # 1.4 GB of them; with 2 MiB pages gold's crash-point test ran 163 -> 137 s
        # (docs/performance.md). A row larger than a page gets a page of its own, so bulk
        # data only asks for more pages.
        PAGE_SIZE: "2m",
        # Spark 4.2 injects runtime Bloom filters into gold's fold joins (the checkpointed
        # side carries no size), and the filter's generated code fails to compile
        # (`Expression "java.lang.Long" is not an rvalue`): Spark falls back to
        # interpreting it, after logging an ERROR with a stack trace a user reads as a
        # failure. The joins are key lookups of a few rows, which the filter cannot prune.
        "spark.sql.optimizer.runtime.bloomFilter.enabled": "false",
        # Derby writes derby.log into the working directory unless told otherwise. The
        # class-data-sharing archive of `make setup` cuts seconds off every JVM's start.
        "spark.driver.extraJavaOptions": " ".join(
            [
                f"-Dderby.stream.error.file={settings.local_dir / 'derby.log'}",
                *([COLLECTOR] if _wants_collector(settings) else []),
                *driver_java_options(),
            ]
        ),
        "spark.databricks.delta.schema.autoMerge.enabled": "false",
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
    }


def uses_embedded_metastore(settings: Settings) -> bool:
    """Whether the session's catalog is the lake's embedded Derby database, which admits
    one JVM at a time (a shared metastore named in the outside settings admits many)."""
    return spark_conf(settings)[METASTORE_URL].startswith(DERBY_URL)


def spark_conf(settings: Settings, scratch_dir: Path | None = None) -> dict[str, str]:
    """Every Spark setting of the session: the project's, then the ones given from
    outside (spark-defaults file, ``--conf``), which win.

    The JVM packages (Delta, the Kafka source, the metastore's JDBC driver) are the jars
    ``make setup`` resolved into the project cache, unless the outside settings say
    where they come from (a cluster names ``spark.jars.packages``; ``pyspark_jobs.jars``).
    ``scratch_dir``: the driver's scratch folder (``pyspark_jobs.scratch``), the JVM's
    temporary folder and so Spark's own, unless ``spark.local.dir`` or
    ``SPARK_LOCAL_DIRS`` says otherwise (naming it there would make Spark warn at every
    start that a cluster manager may override it).
    """
    conf = project_conf(settings)
    if scratch_dir is not None:
        options = conf["spark.driver.extraJavaOptions"]
        conf["spark.driver.extraJavaOptions"] = f"{options} -Djava.io.tmpdir={scratch_dir}"
    outside = dict(settings.extra_conf)
    if not any(key in outside for key in _JAR_SOURCES):
        conf["spark.jars"] = ",".join(local_jars())
    conf.update(outside)
    if conf[METASTORE_URL].startswith(DERBY_URL):
        # Embedded Derby admits one JVM. When another holds it, Hive's metastore handler
        # retries ten times, two seconds apart, for each client Spark opens: an analyst's
        # bare `dbt run` beside a pipeline JVM failed after 80 s instead of 22. Retrying
        # cannot help there; a shared metastore keeps Hive's retries.
        conf.setdefault(HMS_RETRIES, "1")
    if settings.driver_java_options:
        # Added to the driver's flags, the project's or the outside settings' own.
        options = conf.get("spark.driver.extraJavaOptions", "")
        conf["spark.driver.extraJavaOptions"] = f"{options} {settings.driver_java_options}".strip()
    return conf


def get_spark(settings: Settings, app_name: str = "cdc-lakehouse") -> SparkSession:
    """Return the active session, creating it with the lake's settings on first use.

    >>> spark = get_spark(Settings.from_env())  # doctest: +SKIP
    >>> spark.sql("show databases").show()       # doctest: +SKIP
    """
    # The lake itself may be remote (Spark creates its folders); the driver's own
    # files (Derby, derby.log) are always on this host.
    settings.local_dir.mkdir(parents=True, exist_ok=True)
    scratch_dir = _scratch_dir()
    builder = SparkSession.builder.appName(app_name)
    if settings.master:
        builder = builder.master(settings.master)
    for key, value in spark_conf(settings, scratch_dir).items():
        builder = builder.config(key, value)
    spark = builder.enableHiveSupport().getOrCreate()
    jvm = getattr(SparkContext._gateway, "proc", None)
    if scratch_dir is not None and jvm is not None:
        scratch.record_jvm(scratch_dir, jvm.pid)
    spark.sparkContext.setLogLevel("ERROR")
    if settings.master.startswith("local"):
        # PySpark starts its Python workers with PYSPARK_PYTHON, else `python3` from PATH,
        # which imports pyspark_jobs (the document fold's UDF) only when the command runs
        # from the repo, not from cron's home folder. A cluster's executors have their own
        # path (docs/deploy.md).
        spark.sparkContext.pythonExec = settings.worker_python
    return spark


def _scratch_dir() -> Path | None:
    """The scratch folder of a driver JVM this call is about to start (the dead drivers'
    folders swept first); None when a JVM runs already."""
    if SparkContext._gateway is not None:
        return None
    return scratch.prepare()


def end_jvm(timeout: float = 120.0) -> int | None:
    """Stop this process's Spark session and wait for its JVM to exit; its exit status
    (None when this process started no JVM).

    A PySpark process that just returns leaves its JVM to notice the closed pipe and end
    on its own, about half a second later, still holding the embedded metastore: the next
    command of a script (``lakehouse ingest && lakehouse silver``) would find it taken.
    A JVM that does not end within ``timeout`` seconds of being asked is killed.
    """
    gateway = SparkContext._gateway
    if gateway is None:
        return None
    proc = getattr(gateway, "proc", None)
    # A JVM that died already (killed, out of memory) cannot be asked; the command has
    # reported its outcome by now, so that must not turn into a traceback.
    with suppress(Exception):
        if SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()
        gateway.shutdown()
    if proc is None:  # a gateway this process did not launch (PYSPARK_GATEWAY_PORT)
        return None
    proc.stdin.close()  # the gateway JVM exits when its stdin closes
    try:
        status = int(proc.wait(timeout=timeout))
    except subprocess.TimeoutExpired:
        proc.kill()
        status = int(proc.wait())
    scratch.remove_own()
    return status


@contextmanager
def temporary_conf(spark: SparkSession, conf: Mapping[str, str]) -> Iterator[None]:
    """Set these runtime SQL settings for the block; each comes back as it was (unset if
    it was), also when the block fails."""
    before = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, previous in before.items():
            if previous is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, previous)
