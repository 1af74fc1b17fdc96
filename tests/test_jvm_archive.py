"""The driver JVM's class-data-sharing archive: used when `make setup` built it for this
JDK and these jars, left out otherwise, and really mapped by the session's JVM."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pyspark_jobs import jvm_archive
from pyspark_jobs.jvm_archive import archive_path, driver_java_options, fingerprint


def test_no_archive_no_option(tmp_path: Path):
    assert driver_java_options(tmp_path) == []


def test_the_archive_of_this_jdk_and_jars_is_mapped_quietly(tmp_path: Path):
    path = archive_path(tmp_path)
    assert path is not None and path.parent == tmp_path
    path.write_bytes(b"built by make setup")
    options = driver_java_options(tmp_path)
    assert options[0] == f"-XX:SharedArchiveFile={path}"
    # A mismatched archive (after an upgrade) is expected: no warning on every start.
    assert "-Xlog:cds=off" in options


def test_another_jdk_or_other_spark_jars_need_another_archive(tmp_path: Path):
    java = tmp_path / "java"
    java.write_text("a jdk")
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core_2.13-4.2.0.jar").write_text("")
    first = fingerprint(java, jars)
    (jars / "spark-core_2.13-4.2.0.jar").rename(jars / "spark-core_2.13-4.2.1.jar")
    other_jars = fingerprint(java, jars)
    java.write_text("another jdk build")
    other_java = fingerprint(java, jars)
    assert len({first, other_jars, other_java}) == 3


def test_without_java_there_is_no_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert archive_path(tmp_path) is None
    assert driver_java_options(tmp_path) == []


def test_the_sessions_jvm_maps_the_archive_make_setup_built(spark: SparkSession):
    # `make test` runs `make setup`, which builds it; a JVM that rejected it (another
    # class path, a stale archive) would map only the JDK's own.
    path = archive_path(jvm_archive.ARCHIVE_DIR)
    assert path is not None and path.is_file(), "make setup did not build the JVM archive"
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    pid = jvm.java.lang.ProcessHandle.current().pid()
    mapped = {line.split()[-1] for line in Path(f"/proc/{pid}/maps").read_text().splitlines()}
    assert str(path) in mapped
    assert os.path.getsize(path) > 0


def test_a_build_that_fails_leaves_no_archive_and_is_not_retried_on_every_setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # A "JDK" whose java cannot start a driver: the build's pipeline run fails at once.
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\necho 'no JVM here' >&2\nexit 1\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    archives = tmp_path / "archives"
    assert jvm_archive.build(archives) is None
    path = archive_path(archives)
    assert path is not None and not path.exists()
    assert [p.name for p in archives.iterdir()] == [path.with_suffix(".failed").name]
    assert "JAVA_GATEWAY_EXITED" in path.with_suffix(".failed").read_text()
    assert driver_java_options(archives) == []
    started = time.monotonic()
    assert jvm_archive.build(archives) is None  # remembered: no second pipeline run
    assert time.monotonic() - started < 1
