"""Run dbt in-process, inside the pipeline's SparkSession or through a Thrift Server.

With the profile's ``local`` target (the default), dbt-spark's ``session`` method calls
``SparkSession.builder.getOrCreate()``, which returns the session already running in this
process: one JVM, one Derby metastore connection, and no second start-up cost. With
``thrift`` (``Settings.dbt_target``), the models are built by the Spark Thrift Server of a
cluster, which shares the metastore with the jobs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark_jobs.settings import PROJECT_ROOT, Settings


class DbtFailed(RuntimeError):
    """A dbt command did not succeed."""


@dataclass(frozen=True)
class DbtResult:
    """What a dbt invocation did: node names with their status."""

    command: str
    statuses: dict[str, str]


def run_dbt(settings: Settings, args: Sequence[str]) -> DbtResult:
    """Invoke ``dbt <args>`` on the project with the committed profile and the target
    of ``settings.dbt_target``.

    Raises ``DbtFailed`` naming the nodes that failed.
    """
    from dbt.cli.main import dbtRunner

    # The profile reads the lake root from the environment (it is Jinja, not Python).
    os.environ["LAKEHOUSE_ROOT"] = str(settings.lake_root)
    full_args = [
        *args,
        "--target-path",
        str(settings.dbt_dir / "target"),
        "--log-path",
        str(settings.dbt_dir / "logs"),
        "--project-dir",
        str(PROJECT_ROOT),
        "--profiles-dir",
        str(PROJECT_ROOT),
        "--target",
        settings.dbt_target,
    ]
    result = dbtRunner().invoke(full_args)
    statuses: dict[str, str] = {}
    if result.result is not None and hasattr(result.result, "results"):
        for node_result in result.result.results:
            statuses[node_result.node.name] = str(node_result.status)
    if not result.success:
        failed = [name for name, status in statuses.items() if status in ("error", "fail")]
        detail = ", ".join(failed) if failed else str(result.exception or "see dbt log")
        raise DbtFailed(f"dbt {' '.join(args)} failed: {detail}")
    return DbtResult(command=" ".join(args), statuses=statuses)
