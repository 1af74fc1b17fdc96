"""The driver JVM's class-data-sharing (CDS) archive: built once by ``make setup``, mapped
by every later driver JVM of the embedded default.

Before its first job a driver loads, parses and verifies thousands of classes (Spark,
Catalyst, Delta, the Hive metastore client, Derby), and every ``lakehouse`` command, test
process and dbt build starts a new one. The archive holds those classes as the JVM left
them after a whole pipeline run on the bundled samples (``-XX:ArchiveClassesAtExit``), so
a later JVM maps them instead (docs/operations.md has the figures).

The JVM checks the archive against its own build and class path and runs without it, as
before, on any mismatch (another JDK, other Spark jars, a cluster's extra class path). A
file cut short would crash it instead, so the archive only ever appears whole: the JVM
writes it aside as it exits, and it is renamed into place once that JVM has ended. Its
name holds a fingerprint of the JDK and of Spark's jars, so an upgrade of either makes the
driver run without it until ``make setup`` builds the next one.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pyspark_jobs.settings import DEFAULT_CONFIG, PROJECT_ROOT

ARCHIVE_DIR = PROJECT_ROOT / ".cache" / "jvm"
# Set by ``build`` for its pipeline run: the driver then writes an archive there as it
# exits, instead of mapping one.
DUMP_ENV = "LAKEHOUSE_JVM_ARCHIVE_DUMP"
# Quiet: a mismatched archive is expected after an upgrade and only costs the old speed.
_QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")


def _java() -> Path | None:
    """The java Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def _spark_jars() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home()) / "jars"


def fingerprint(java: Path | None = None, jars: Path | None = None) -> str | None:
    """What the archive was built for: the JDK binary and the names of Spark's jars
    (None when there is no java to run)."""
    java = java or _java()
    jars = jars or _spark_jars()
    if java is None or not jars.is_dir():
        return None
    stat = java.stat()
    parts = [str(java), str(stat.st_size), str(stat.st_mtime_ns), *sorted(os.listdir(jars))]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def archive_path(archive_dir: Path = ARCHIVE_DIR) -> Path | None:
    """Where the archive for this JDK and these Spark jars is (or would be) kept."""
    built_for = fingerprint()
    return archive_dir / f"driver-{built_for}.jsa" if built_for else None


def driver_java_options(archive_dir: Path = ARCHIVE_DIR) -> list[str]:
    """The driver JVM's options that map the archive; none when it has not been built
    (or that write it, during ``build``)."""
    dump = os.environ.get(DUMP_ENV)
    if dump:
        return [f"-XX:ArchiveClassesAtExit={dump}"]
    path = archive_path(archive_dir)
    if path is None or not path.is_file():
        return []
    return [f"-XX:SharedArchiveFile={path}", *_QUIET]


def _run_workload() -> int:
    """The pipeline on the bundled samples, then the JVM ended and waited for: it writes
    the archive as it exits (the settings come from the environment ``build`` sets)."""
    from pyspark_jobs import cli
    from pyspark_jobs.session import end_jvm

    code = cli.main(["run"])
    status = end_jvm(timeout=600)
    if status is None:
        return code or 1
    return code or status


def build(archive_dir: Path = ARCHIVE_DIR, force: bool = False) -> Path | None:
    """Build the archive for this JDK and these jars unless it is there; return its path
    (None when it could not be built: the pipeline then runs without it)."""
    target = archive_path(archive_dir)
    if target is None:
        print("jvm archive: no java found; not built", file=sys.stderr)
        return None
    failed = target.with_suffix(".failed")
    if not force and (target.is_file() or failed.is_file()):
        # A build that failed is not tried again on every `make run`: it costs a run.
        return target if target.is_file() else None
    archive_dir.mkdir(parents=True, exist_ok=True)
    failed.unlink(missing_ok=True)
    aside = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with tempfile.TemporaryDirectory(prefix="lakehouse-jvm-archive-") as scratch:
        # The embedded default's own settings (outside ones, a cluster's, would replace
        # the driver's options), on a scratch lake.
        env = {k: v for k, v in os.environ.items() if k != "LAKEHOUSE_SPARK_DEFAULTS"}
        env.update(
            LAKEHOUSE_ROOT=str(Path(scratch) / "lake"),
            LAKEHOUSE_CONFIG=str(DEFAULT_CONFIG),
            **{DUMP_ENV: str(aside)},
        )
        print(f"jvm archive: running the pipeline on the samples to build {target.name}")
        done = subprocess.run(
            [sys.executable, "-m", "pyspark_jobs.jvm_archive", "--workload"],
            env=env,
            cwd=scratch,
            capture_output=True,
            text=True,
        )
        try:
            if done.returncode != 0 or not aside.is_file() or aside.stat().st_size == 0:
                tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
                failed.write_text(tail + "\n")
                print(
                    f"jvm archive: not built (the pipeline runs without it; why: {failed}; "
                    "retry: python -m pyspark_jobs.jvm_archive --force):",
                    file=sys.stderr,
                )
                print(tail, file=sys.stderr)
                return None
            for old in archive_dir.glob("driver-*"):
                old.unlink()
            os.replace(aside, target)
        finally:
            aside.unlink(missing_ok=True)
    print(f"jvm archive: {target} ({target.stat().st_size / 2**20:.0f} MiB)")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pyspark_jobs.jvm_archive",
        description="Build the driver JVM's class-data-sharing archive (.cache/jvm) unless "
        "it is there for this JDK and these Spark jars: one pipeline run on the bundled "
        "samples in a scratch lake. Every later driver JVM maps it and starts faster. "
        "Exit 0 also when it could not be built (the pipeline runs without it).",
    )
    parser.add_argument("--force", action="store_true", help="build it again even if present")
    parser.add_argument(
        "--options",
        action="store_true",
        help="only print the JVM options that map the archive (nothing when it is not built), "
        "for a driver JVM the project does not start itself (an analyst's dbt)",
    )
    parser.add_argument("--workload", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.workload:
        return _run_workload()
    if args.options:
        print(" ".join(driver_java_options()))
        return 0
    build(force=args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
