"""The JVM packages the pipeline needs, by Maven coordinates, and their project-local cache.

One list of coordinates serves every Spark the project talks to. ``make setup`` resolves
it once with Spark's own resolver (Ivy) into ``.cache/ivy`` (``python -m
pyspark_jobs.jars``), so nothing downloads at run time:

- the embedded default (jobs, tests, an analyst's ``dbt run``) puts the resolved jar files
  on ``spark.jars``: no resolution at all when a JVM starts;
- a cluster's settings name the same coordinates (``spark.jars.packages``) with
  ``spark.jars.ivy`` on the same cache (see ``packages_conf``); the driver resolves them
  from the cache and serves the jars to its executors.

Delta's Maven release for this Spark line is 4.4.0; the delta-spark 4.4.1 wheel on PyPI is
the Python API only and works with it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyspark_jobs.settings import PROJECT_ROOT

PACKAGES = (
    "io.delta:delta-spark_4.2_2.13:4.4.0",
    "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0",
    # The shared metastore's JDBC driver (PostgreSQL); unused with the embedded Derby.
    "org.postgresql:postgresql:42.7.14",
)
# Transitive dependencies that Spark's own distribution already ships (at its own
# versions), or that the pipeline never loads (Delta Kernel, Unity Catalog client):
# resolving them would put a second, older copy beside Spark's (jackson, parquet,
# hadoop-client, log4j) and send ~100 MB more to every executor.
EXCLUDES = (
    "io.delta:delta-kernel-api",
    "io.delta:delta-kernel-defaults",
    "io.delta:delta-kernel-unitycatalog",
    "io.unitycatalog:unitycatalog-client",
    "io.unitycatalog:unitycatalog-hadoop",
    "org.apache.hadoop:hadoop-client-api",
    "org.apache.hadoop:hadoop-client-runtime",
    "org.slf4j:slf4j-api",
    "org.apache.logging.log4j:log4j-api",
    "org.apache.logging.log4j:log4j-core",
    "org.apache.logging.log4j:log4j-slf4j2-impl",
    "com.google.code.findbugs:jsr305",
    "org.xerial.snappy:snappy-java",
    "at.yawk.lz4:lz4-java",
    "com.github.luben:zstd-jni",
    "org.scala-lang.modules:scala-parallel-collections_2.13",
    "org.checkerframework:checker-qual",
)
IVY_DIR = PROJECT_ROOT / ".cache" / "ivy"
# The resolved jar files (names in IVY_DIR/jars), one a line, written by
# `python -m pyspark_jobs.jars`.
MANIFEST = IVY_DIR / "resolved.txt"


class JarsMissing(RuntimeError):
    """The project's jar cache has not been filled (``make setup``)."""


def packages_conf(ivy_dir: Path = IVY_DIR) -> dict[str, str]:
    """Spark settings that resolve the packages by coordinates from the project cache."""
    return {
        "spark.jars.packages": ",".join(PACKAGES),
        "spark.jars.excludes": ",".join(EXCLUDES),
        "spark.jars.ivy": str(ivy_dir),
    }


def metastore_driver_jar(ivy_dir: Path = IVY_DIR) -> str:
    """PostgreSQL's JDBC driver in the cache. A shared metastore needs it on the driver's
    own classpath (``spark.driver.extraClassPath``): ``java.sql.DriverManager`` does not
    see drivers that only ``spark.jars`` / ``spark.jars.packages`` load."""
    group, artifact, version = PACKAGES[-1].split(":")
    assert group == "org.postgresql"
    return str(ivy_dir / "jars" / f"{group}_{artifact}-{version}.jar")


def _manifest_header() -> str:
    # The manifest is stale when the coordinates change.
    return "# " + ",".join(PACKAGES) + " excluding " + ",".join(EXCLUDES)


def local_jars(manifest: Path = MANIFEST) -> list[str]:
    """The resolved jar files (absolute paths), for ``spark.jars``."""
    try:
        lines = manifest.read_text().splitlines()
    except FileNotFoundError:
        raise JarsMissing(f"no resolved jars in {manifest.parent}: run `make setup`") from None
    if not lines or lines[0] != _manifest_header():
        raise JarsMissing(f"{manifest} lists other packages than PACKAGES: run `make setup`")
    jars = [str(manifest.parent / "jars" / name) for name in lines[1:]]
    missing = [jar for jar in jars if not Path(jar).is_file()]
    if missing:
        raise JarsMissing(f"jars missing from {manifest.parent}: {missing}: run `make setup`")
    return jars


def resolve(ivy_dir: Path = IVY_DIR) -> list[str]:
    """Resolve ``PACKAGES`` with Spark's resolver into ``ivy_dir``; the jar files.

    Starts a throw-away local JVM with ``spark.jars.packages``, exactly as a cluster
    driver would, and records what it put on ``spark.jars``. Downloads only what the
    cache lacks.
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[1]").appName("cdc-lakehouse-resolve-jars")
    for key, value in {**packages_conf(ivy_dir), "spark.ui.enabled": "false"}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        uris = spark.sparkContext.getConf().get("spark.jars", "")
    finally:
        spark.stop()
    names = [uri.rsplit("/", 1)[-1] for uri in uris.split(",") if uri]
    manifest = ivy_dir / MANIFEST.name
    manifest.write_text("\n".join([_manifest_header(), *names]) + "\n")
    return local_jars(manifest)


def main() -> int:
    try:
        jars = local_jars()
    except JarsMissing:
        jars = resolve()
    print(f"{len(jars)} jars ready in {IVY_DIR}")
    for jar in jars:
        print(f"  {Path(jar).name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
