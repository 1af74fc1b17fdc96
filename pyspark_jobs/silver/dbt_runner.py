"""Run dbt in-process, inside the pipeline's SparkSession or through a Thrift Server.

With the profile's ``local`` target (the default), dbt-spark's ``session`` method calls
``SparkSession.builder.getOrCreate()``, which returns the session already running in this
process: one JVM, one Derby metastore connection, and no second start-up cost. With
``thrift`` (``Settings.dbt_target``), the models are built by the Spark Thrift Server of a
cluster, which shares the metastore with the jobs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark_jobs.catalog import forget_lookups
from pyspark_jobs.settings import PROJECT_ROOT, Settings
from pyspark_jobs.silver import parse_cache


class DbtFailed(RuntimeError):
    """A dbt command did not succeed; ``failures`` has one line per node that failed."""

    def __init__(self, message: str, failures: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.failures = tuple(failures)


class DbtTestsFailed(DbtFailed):
    """Every node that failed is a data test that found rows breaking its rule: the data
    is wrong, not the project or the session."""


# Delta's error classes for a commit that lost to a concurrent one (its Java exceptions
# carry them in their messages, in-process and through a Thrift Server alike).
_LOST_COMMIT_RACE = (
    "DELTA_CONCURRENT_APPEND",
    "DELTA_CONCURRENT_DELETE_READ",
    "DELTA_CONCURRENT_DELETE_DELETE",
    "DELTA_CONCURRENT_TRANSACTION",
    "DELTA_CONCURRENT_WRITE",
    "DELTA_METADATA_CHANGED",
    "DELTA_PROTOCOL_CHANGED",
)


def lost_a_commit_race(failure: DbtFailed) -> bool:
    """Whether every node of ``failure`` failed because another writer committed to its
    table first (an analyst's dbt run beside the pipeline's build, on a shared
    metastore): the build is right to run again, and nothing else went wrong."""
    return bool(failure.failures) and all(
        any(name in line for name in _LOST_COMMIT_RACE) for line in failure.failures
    )


@dataclass(frozen=True)
class DbtResult:
    """What a dbt invocation did: node names with their status."""

    command: str
    statuses: dict[str, str]


def run_dbt(
    settings: Settings,
    args: Sequence[str],
    parse_cache_dir: Path = parse_cache.CACHE_DIR,
    environment: Mapping[str, str | None] | None = None,
) -> DbtResult:
    """Invoke ``dbt <args>`` on the project with the committed profile and the target
    of ``settings.dbt_target``, starting from the parse saved in ``parse_cache_dir`` for
    the same vars (``silver/parse_cache.py``). ``environment`` sets (a text) or unsets
    (None) environment variables the models read with ``env_var()``, for this invocation
    only.

    Raises ``DbtTestsFailed`` when only data tests failed, ``DbtFailed`` otherwise; the
    message names each failed node, where it is declared and dbt's message, e.g.
    ``unique_change_log_change_id (models/silver/_silver.yml): Got 1 result, configured to
    fail if != 0; rows: <lake>/dbt/target/compiled/.../unique_change_log_change_id.sql``.
    """
    from dbt.cli.main import dbtRunner

    # The profile reads the lake root from the environment (it is Jinja, not Python).
    os.environ["LAKEHOUSE_ROOT"] = str(settings.lake_root)
    target_dir = settings.dbt_dir / "target"
    parse_key = parse_cache.parse_key(args, settings.dbt_target)
    parse_cache.restore(target_dir, parse_key, parse_cache_dir)
    full_args = [
        *args,
        "--target-path",
        str(target_dir),
        "--log-path",
        str(settings.dbt_dir / "logs"),
        "--project-dir",
        str(PROJECT_ROOT),
        "--profiles-dir",
        str(PROJECT_ROOT),
        "--target",
        settings.dbt_target,
        # A scheduled build reports nothing to dbt Labs: behind a firewall that drops
        # outbound packets, each invocation's flush of usage events waits out a 5 s
        # connect timeout (dbt/tracking.py), and a pipeline has no business phoning home.
        "--no-send-anonymous-usage-stats",
    ]
    with _environment(environment or {}):
        try:
            result = dbtRunner().invoke(full_args)
        finally:
            # dbt may have dropped or replaced any table it builds.
            forget_lookups()
    if result.success:
        parse_cache.keep(target_dir, parse_key, parse_cache_dir)
    statuses: dict[str, str] = {}
    failed: list[Any] = []
    if result.result is not None and hasattr(result.result, "results"):
        for node_result in result.result.results:
            statuses[node_result.node.name] = str(node_result.status)
            if str(node_result.status) in ("error", "fail"):
                failed.append(node_result)
    if not result.success:
        failures = [_failure(r) for r in failed]
        detail = "; ".join(failures) or str(result.exception or "see the dbt log")
        message = f"dbt {' '.join(args)} failed: {detail}"
        data_tests_only = bool(failed) and all(
            str(r.status) == "fail" and r.node.resource_type == "test" for r in failed
        )
        raise (DbtTestsFailed if data_tests_only else DbtFailed)(message, failures)
    return DbtResult(command=" ".join(args), statuses=statuses)


@contextmanager
def _environment(values: Mapping[str, str | None]) -> Iterator[None]:
    """``values`` in the process environment while the block runs, then what was there."""
    before = {name: os.environ.get(name) for name in values}
    try:
        _set_environment(values)
        yield
    finally:
        _set_environment(before)


def _set_environment(values: Mapping[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _failure(node_result: Any) -> str:
    """One line for a failed node: name, the file declaring it, dbt's message and, for a
    data test, the compiled query that returns the offending rows."""
    node = node_result.node
    message = " ".join(str(node_result.message or node_result.status).split())
    line = f"{node.name} ({node.original_file_path}): {message}"
    compiled = getattr(node, "compiled_path", None)
    if node.resource_type == "test" and compiled:
        # Under the target path: absolute as run_dbt passes it, else the project's.
        line += f"; rows: {PROJECT_ROOT / Path(compiled)}"
    return line
