"""Spark 4.2's own CDC apply, tried on the Debezium part: a declarative pipeline
(``pyspark.pipelines``) whose ``create_auto_cdc_flow`` applies the changes to a Delta
``users`` table, run by ``spark-pipelines``.

With delta-spark 4.4 the flow is refused (``AUTOCDC_TARGET_DOES_NOT_SUPPORT_MERGE``: the
Delta table does not expose row-level operations to it). The refusal is part of the
results, not hidden; should a later pin let it run, its time is reported and its table
compared with ours (part ``python -m benchmarks.auto_cdc`` does the comparison).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from pyspark.sql import SparkSession

from benchmarks.child import Params, child_env, run_part, start_part
from benchmarks.compare import differences
from benchmarks.debezium_changes import USER_COLUMNS
from benchmarks.rss import RssSampler
from pyspark_jobs.jars import local_jars
from pyspark_jobs.settings import Settings

FLOW = Path(__file__).with_name("auto_cdc_flow.py")
# spark-submit drops settings whose name does not start with "spark.".
LANDING_CONF = "spark.bench.debezium_landing"
# Static settings go on the command line; the spec's `configuration` cannot set them.
SUBMIT_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # A refused flow is retried twice by default, 10 s apart: report the first refusal.
    "spark.sql.pipelines.maxFlowRetryAttempts": "0",
}
# The pipeline CLI ends with "Error: [CLASS] message"; any "[CLASS] message" otherwise.
_ERRORS = (
    re.compile(r"^Error: (\[([A-Z][A-Z0-9_]+)\] [^\n]*)", re.MULTILINE),
    re.compile(r"(\[([A-Z][A-Z0-9_]+)\] [^\n]*)"),
)


def first_error(output: str) -> tuple[str | None, str]:
    """The error class and message of a failed ``spark-pipelines`` run.

    >>> first_error("noise\\nError: [AUTOCDC_X] Cannot start. SQLSTATE: 0A000\\nmore")
    ('AUTOCDC_X', '[AUTOCDC_X] Cannot start. SQLSTATE: 0A000')
    """
    for pattern in _ERRORS:
        found = pattern.search(output)
        if found:
            return found.group(2), found.group(1)
    lines = output.strip().splitlines()
    return None, lines[-1] if lines else ""


def try_auto_cdc(debezium_landing: str, ours: str, folder: str) -> dict[str, Any]:
    """Run the AUTO CDC pipeline on the Debezium landing files; what happened."""
    work = Path(folder)
    work.mkdir(parents=True, exist_ok=True)
    warehouse = work / "warehouse"
    # Pipeline libraries are globs relative to the spec's folder.
    shutil.copyfile(FLOW, work / FLOW.name)
    spec = work / "spark-pipeline.yml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "bench_auto_cdc",
                "storage": (work / "storage").as_uri(),
                "database": "default",
                "configuration": {LANDING_CONF: debezium_landing},
                "libraries": [{"glob": {"include": FLOW.name}}],
            }
        )
    )
    conf = {**SUBMIT_CONF, "spark.sql.warehouse.dir": str(warehouse)}
    command = [str(Path(sys.executable).with_name("spark-pipelines"))]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    command += ["run", "--spec", str(spec)]
    log = work / "spark-pipelines.log"
    # Delta's jars (the ones `make setup` resolved) on the JVM's own class path: the session
    # extension and catalog are loaded before `spark.jars` could add them, and classes from
    # both loaders make the catalog refuse Delta tables.
    env = {**child_env(), "SPARK_DIST_CLASSPATH": os.pathsep.join(local_jars())}
    started = time.time()
    with log.open("w") as sink:
        code = subprocess.run(
            command, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=work
        ).returncode
    seconds = time.time() - started
    output = log.read_text()
    if code != 0:
        error_class, message = first_error(output)
        return {
            "status": "refused",
            "exit_code": code,
            "seconds": seconds,
            "error_class": error_class,
            "message": message,
        }
    compared = start_part(
        "benchmarks.auto_cdc",
        {
            "lake": str(work / "compare-lake"),
            "ours": ours,
            "theirs": str(warehouse / "users"),
        },
        work / "compare",
    )
    return {"status": "ran", "seconds": seconds, "differences": compared["differences"]}


def measure(
    spark: SparkSession, settings: Settings, params: Params, sampler: RssSampler
) -> dict[str, Any]:
    ours = spark.read.format("delta").load(params["ours"])
    theirs = spark.read.format("delta").load(params["theirs"])
    return {"differences": differences(ours, theirs, USER_COLUMNS)}


if __name__ == "__main__":
    run_part(measure)
