"""The pipeline on a cluster, by configuration only (issue 14).

One run, as lean as it can be: `scripts/cluster.py start` (PostgreSQL metastore, a Spark
standalone master with two workers, a Thrift Server), then `lakehouse run` on the samples
with the cluster's settings and a `file://` lake root: the jobs are an application of the
master with executors on both workers, silver is built by dbt through the Thrift Server.
The jobs keep cycling (`run --every`) while an analyst's `dbt run` and `dbt test` go
through the same Thrift Server: once a new change has landed, the analyst's `dbt run`
starts at the same moment as the cycle's own silver build: both insert into
`silver.change_log` and Delta lets one commit win. The pipeline must go on (a build that
lost builds again), the analyst's run either succeeds or fails naming the conflict, and
no change may land twice (the analyst's `dbt test`). Then
everything stops (and nothing may be left running, whatever failed), and gold must equal
a local run on a plain-path lake with the embedded Derby metastore, which compiles every
plan where the cluster's gold ran its small tables interpreted.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest
from pyspark.sql import SparkSession

from pyspark_jobs.config import LakehouseConfig
from pyspark_jobs.pipeline import run_pipeline
from pyspark_jobs.settings import PROJECT_ROOT, Settings
from pyspark_jobs.small_inputs import THRESHOLD_KEY
from tests.conftest import SHORT_JVM_OPTIONS, copy_of_samples, gold_table_names, reset_lake

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

BIN = Path(sys.executable).parent
SCRIPT = PROJECT_ROOT / "scripts" / "cluster.py"
# Seconds from one cycle's start to the next (``run --every``).
EVERY = 60
# Set by each apply: the only gold column that differs between two correct runs.
APPLY_TIME = "_updated_at"


def cluster_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cluster_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line)


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


@contextmanager
def loopback_cluster(run_dir: Path, lake_root: str) -> Iterator[dict[str, str]]:
    """The cluster's environment (cluster.env) while it runs; stopped whatever happens,
    and then no process of it may be left."""
    script = [sys.executable, str(SCRIPT)]
    try:
        started = subprocess.run(
            [
                *script,
                *("start", "--dir", str(run_dir), "--lake-root", lake_root),
                # Eight JVMs on two cores with the jobs' driver, each running a few rows:
                # C1 and Serial, as the suite's other short JVMs (tests/conftest.py).
                f"--java-options={SHORT_JVM_OPTIONS}",
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert started.returncode == 0, f"cluster start failed:\n{started.stdout}{started.stderr}"
        yield {**os.environ, **read_env(run_dir / "cluster.env")}
    finally:
        stopped = subprocess.run(
            [*script, "stop", "--dir", str(run_dir)], capture_output=True, text=True, timeout=600
        )
        state = json.loads((run_dir / "state.json").read_text() or "{}")
        left = cluster_script().marked_processes(run_dir.resolve(), state.get("pg_dir"))
        assert stopped.returncode == 0, f"cluster stop failed:\n{stopped.stdout}{stopped.stderr}"
        assert left == [], f"processes left after stop: {left}"


def cluster_jvms(run_dir: Path) -> list[str]:
    """The command lines of the Java processes of the cluster's run folder."""
    found = []
    for pid in cluster_script().marked_processes(run_dir.resolve(), None):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:  # ended since
            continue
        if Path(argv[0].decode()).name == "java":
            found.append(" ".join(a.decode(errors="replace") for a in argv))
    return found


class Lines:
    """A process's output lines, read by a thread, waited for by content."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, args=(process,), daemon=True).start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def all_lines(self, timeout: float = 10) -> list[str]:
        """Every line, once the process has ended (its output closed)."""
        while (line := self._queue.get(timeout=timeout)) is not None:
            self.seen.append(line)
        self._queue.put(None)  # a second call ends at once
        return self.seen

    def wait_for(self, *texts: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.seen.append(line)
            if any(text in line for text in texts):
                return line
        tail = "\n".join(self.seen[-60:])
        raise AssertionError(f"none of {texts} in the output:\n{tail}")


def analyst_dbt(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """An analyst's dbt command through the Thrift Server, started."""
    return subprocess.Popen(
        [str(BIN / "dbt"), *args, "--profiles-dir", ".", "--target", "thrift"],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def dbt(args: list[str], env: dict[str, str]) -> str:
    process = analyst_dbt(args, env)
    out, _ = process.communicate(timeout=900)
    assert process.returncode == 0, f"dbt {args} failed:\n{out[-6000:]}"
    return out


def land_new_user(landing: Path) -> None:
    """A change the samples do not have, written aside and renamed, as a producer should."""
    record = {
        "topic": "shop.public.users",
        "partition": 0,
        "offset": 100,
        "timestamp": 1700000009005,
        "key": {"USER_ID": 500},
        "value": {
            "op": "c",
            "before": None,
            "after": {"USER_ID": 500, "TAX_CODE": "tc-500", "NAME": "Neo", "COINS": 1},
            "source": {"ts_ms": 1700000009000, "db": "shop", "table": "users", "lsn": 9000},
        },
    }
    aside = landing.parent / ".late.jsonl"
    aside.write_text(json.dumps(record) + "\n")
    os.replace(aside, landing / "late.jsonl")


class Phases:
    """Wall time of each phase, printed (pytest -s, or the log of a failed run)."""

    def __init__(self) -> None:
        self.last = time.monotonic()

    def done(self, phase: str) -> None:
        now = time.monotonic()
        print(f"cluster test: {phase}: {now - self.last:.0f} s", flush=True)
        self.last = now


def gold_rows(spark: SparkSession, table: str, location: str | None = None) -> list[tuple]:
    frame = spark.read.format("delta").load(location) if location else spark.table(table)
    columns = sorted(c for c in frame.columns if c != APPLY_TIME)
    return sorted((tuple(r) for r in frame.select(*columns).collect()), key=repr)


@pytest.mark.timeout(3000)
def test_the_pipeline_on_the_cluster_matches_the_local_run(
    spark: SparkSession, settings: Settings, tmp_path_factory: pytest.TempPathFactory
):
    config: LakehouseConfig = copy_of_samples(tmp_path_factory.mktemp("cluster-samples"))
    run_dir = tmp_path_factory.mktemp("cluster-run")
    lake_root = tmp_path_factory.mktemp("cluster-lake").as_uri()  # file:///...
    assert lake_root.startswith("file:///")
    phases = Phases()

    with loopback_cluster(run_dir, lake_root) as env:
        phases.done("cluster started")
        # `--every` keeps the jobs application (and its metastore connection) alive and
        # cycling after its first cycle, while the master is looked at and the analyst
        # works. Not back to back: a cycle that finds nothing new still costs the cluster
        # about 20 s of CPU, which the analyst's dbt commands beside it wait for on 2
        # cores; a minute apart, the new change waits at most a minute for its cycle.
        jobs = subprocess.Popen(
            [str(BIN / "lakehouse"), "--config", str(config.path), "run", "--every", str(EVERY)],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            output = Lines(jobs)
            ended = output.wait_for("cycle 1: succeeded", "cycle 1: stopped", timeout=2400)
            assert "succeeded" in ended, "\n".join(output.seen[-60:])
            assert any("Concurrency: 1 threads (target='thrift')" in s for s in output.seen)
            # Gold planned in the jobs' session, silver in the Thrift Server's.
            assert "gold: small tables, planned without code generation" in output.seen
            assert not any(line.startswith("silver: small tables") for line in output.seen)
            phases.done("lakehouse run on the cluster")

            # The master's application list: the jobs and the Thrift Server run on it,
            # with executors on both workers.
            state = json.loads((run_dir / "state.json").read_text())
            master = get_json(f"http://127.0.0.1:{state['master']['webui_port']}/json/")
            apps = {app["name"]: app for app in master["activeapps"]}
            assert set(apps) == {"cdc-lakehouse", "lakehouse-thrift-server"}
            assert apps["cdc-lakehouse"]["cores"] == 2
            jobs_app = apps["cdc-lakehouse"]["id"]
            workers = [get_json(f"{w['webuiaddress']}/json/") for w in master["workers"]]
            assert len(workers) == 2
            for worker in workers:
                assert jobs_app in {e["appid"] for e in worker["executors"]}, worker

            # Every JVM of the cluster took the options given to `start`: the master, the
            # workers, the Thrift Server and every executor.
            jvms = cluster_jvms(run_dir)
            assert len(jvms) >= 7, jvms
            assert all(SHORT_JVM_OPTIONS in cmdline for cmdline in jvms), jvms

            # An analyst on the same catalog, while the jobs application holds it too: a
            # new change, and the analyst's `dbt run` (silver's models and the mart)
            # started with the next cycle's silver build: both insert the change into
            # silver.change_log.
            landing = config.source("shop_debezium").landing
            assert landing is not None
            land_new_user(landing)
            # Cycle 1 read the samples; a batch of this source now is the new file's.
            output.wait_for("bronze shop_debezium: batch", timeout=600)
            cycle = next(
                line.split(":")[0]  # "cycle N"
                for line in reversed(output.seen)
                if line.startswith("cycle ") and line.endswith(": started")
            )
            output.wait_for("silver: building", timeout=600)
            analyst = analyst_dbt(["run"], env)
            ended = output.wait_for(f"{cycle}: succeeded", f"{cycle}: stopped", timeout=900)
            analyst_out, _ = analyst.communicate(timeout=900)
            assert "succeeded" in ended, "\n".join(output.seen[-60:])
            pipeline_lost = [line for line in output.seen if "another writer committed" in line]
            analyst_won = analyst.returncode == 0
            if not analyst_won:
                # The analyst's run lost the race: dbt names Delta's conflict, and the
                # analyst's path is to run again.
                assert "DELTA_CONCURRENT" in analyst_out, analyst_out[-6000:]
                dbt(["run"], env)
            print(
                f"cluster test: {cycle}: the analyst's run "
                f"{'succeeded' if analyst_won else 'lost'}; "
                f"the pipeline's build lost {len(pipeline_lost)} time(s)",
                flush=True,
            )
            phases.done("analyst's dbt run beside the pipeline's silver build")
            # Each change landed once (unique_change_log_change_id), whoever won.
            dbt(["test"], env)
            phases.done("analyst dbt test")
        finally:
            jobs.send_signal(signal.SIGTERM)  # ends --every after the cycle in flight
            try:
                jobs.wait(timeout=180)
            except subprocess.TimeoutExpired:
                os.killpg(jobs.pid, signal.SIGKILL)
                jobs.wait()
        assert jobs.returncode == 0
        cycles = [s for s in output.all_lines() if s.startswith("cycle ") and " in " in s]
        print("cluster test: " + "; ".join(cycles), flush=True)
    phases.done("jobs and cluster stopped")

    # The same samples on the embedded default: a plain-path lake, Derby, local[2]. The
    # cluster's gold planned its small tables without code generation; this run compiles
    # every plan (pyspark_jobs/small_inputs.py): both ways must give the same tables.
    local = reset_lake(spark, settings)
    spark.conf.set(THRESHOLD_KEY, "0")
    try:
        assert run_pipeline(spark, local, config, log=lambda _: None) == 0
    finally:
        spark.conf.unset(THRESHOLD_KEY)
    warehouse = f"{lake_root.rstrip('/')}/warehouse"
    for table in gold_table_names(config):
        schema, name = table.split(".")
        on_cluster = gold_rows(spark, table, f"{warehouse}/{schema}.db/{name}")
        assert on_cluster == gold_rows(spark, table), table
    assert sum(len(gold_rows(spark, t)) for t in gold_table_names(config)) > 0
    # The change landed during the cycles reached both.
    assert spark.table("gold.users").where("USER_ID = 500").count() == 1
    phases.done("local run and comparison")
