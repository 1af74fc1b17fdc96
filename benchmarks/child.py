"""Each measured part of the benchmark runs in a process (and so a JVM) of its own.

The parent (``benchmarks.run``) writes the part's parameters as JSON and starts
``python -m benchmarks.<part> --params P --out O``; the part opens the project's Spark
session on its own lake, measures, and writes its figures as JSON. A part's process
starts cold like a user's would, and its driver memory is its own.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from benchmarks.rss import RssSampler
from pyspark_jobs.session import get_spark
from pyspark_jobs.settings import PROJECT_ROOT, Settings

Params = dict[str, Any]
Measure = Callable[[SparkSession, Settings, Params, RssSampler], dict[str, Any]]


class PartFailed(RuntimeError):
    """A part's process ended with an error."""


def part_settings(params: Params) -> Settings:
    """The part's lake (``params['lake']``) and sources file; master and shuffle
    partitions from the environment, as for ``lakehouse``."""
    return Settings.from_env().with_overrides(
        lake_root=params["lake"], config_path=params.get("config")
    )


def run_part(measure: Measure) -> None:
    """The ``main`` of a part's module: session, RSS sampling, ``measure``, JSON out."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--params", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    params: Params = json.loads(args.params.read_text())
    settings = part_settings(params)
    with RssSampler() as sampler:
        started = time.time()
        spark = get_spark(settings, app_name="cdc-lakehouse-bench")
        session_seconds = time.time() - started
        try:
            figures = measure(spark, settings, params, sampler)
        finally:
            spark.stop()
    figures["session_seconds"] = session_seconds
    figures["peak_rss_bytes"] = sampler.peak()
    args.out.write_text(json.dumps(figures, indent=2, sort_keys=True))


def child_env() -> dict[str, str]:
    """The environment of a part: the repo importable, Spark's driver on loopback, and
    the venv's Python for any Python worker."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")])
        ),
        "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
        "PYSPARK_PYTHON": sys.executable,
    }


def start_part(module: str, params: Params, folder: Path, *call: str) -> dict[str, Any]:
    """Run part ``module`` with ``params`` (its files under ``folder``); its figures.

    With ``call`` (``"package.module:function"``), run that function with ``params`` as
    keyword arguments in a fresh Python process instead (``module`` is then
    ``benchmarks.child``): measurements that orchestrate processes of their own run from
    the code as it is when they start, like the parts.
    """
    folder.mkdir(parents=True, exist_ok=True)
    params_file, out = folder / "params.json", folder / "figures.json"
    params_file.write_text(json.dumps(params, indent=2, default=str))
    log = folder / "part.log"
    with log.open("w") as sink:
        code = subprocess.run(
            [sys.executable, "-m", module, *call, "--params", str(params_file), "--out", str(out)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=child_env(),
            cwd=folder,
        ).returncode
    if code != 0:
        tail = "\n".join(log.read_text().splitlines()[-15:])
        raise PartFailed(f"{module} exited {code}; the end of {log}:\n{tail}")
    figures: dict[str, Any] = json.loads(out.read_text())
    return figures


def call_in_child(function: str, folder: Path, /, **kwargs: Any) -> dict[str, Any]:
    """``function`` (``"package.module:name"``) called with ``kwargs`` in a fresh process."""
    return start_part("benchmarks.child", kwargs, folder, function)


def _call_main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("function")
    parser.add_argument("--params", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    module, name = args.function.split(":")
    function = getattr(importlib.import_module(module), name)
    figures = function(**json.loads(args.params.read_text()))
    args.out.write_text(json.dumps(figures, indent=2, sort_keys=True))


if __name__ == "__main__":
    _call_main()
