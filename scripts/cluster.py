#!/usr/bin/env python3
"""A small Spark cluster on loopback: PostgreSQL (the shared metastore), a Spark standalone
master with workers, and a Spark Thrift Server for dbt. Start, use, stop:

    .venv/bin/python scripts/cluster.py start            # prints what it started
    set -a; . .cache/cluster/cluster.env; set +a         # point lakehouse and dbt at it
    .venv/bin/lakehouse run                              # jobs on the workers, silver via thrift
    .venv/bin/dbt run --profiles-dir . --target thrift   # an analyst, on the same catalog
    .venv/bin/python scripts/cluster.py stop             # nothing is left running

Everything comes from the project's own set-up: Spark's master, worker and Thrift Server
classes from the pyspark distribution in the venv, PostgreSQL from Debian's package
(`make setup-cluster`), the JDBC driver and Delta by Maven coordinates from the project's
Ivy cache (pyspark_jobs/jars.py). Every process listens on 127.0.0.1 only, on free ports.

The run folder (--dir, default .cache/cluster) gets:
  cluster.env          LAKEHOUSE_* and SPARK_THRIFT_* for the jobs and dbt (0600: it holds
                       the metastore password, which the settings file only names)
  spark-defaults.conf  the jobs' Spark settings on this cluster (lakehouse --spark-defaults)
  thrift-server.conf   the Thrift Server's: the jobs' settings plus its own resources
  state.json           ports and process ids; logs/ every process's log

Stop ends each process group (a worker's group holds its executors), stops PostgreSQL, and
then ends any process still marked with the run folder; it fails if one survives.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pyspark_jobs.jars import local_jars, metastore_driver_jar, packages_conf  # noqa: E402
from pyspark_jobs.session import spark_conf  # noqa: E402
from pyspark_jobs.settings import DEFAULT_CONFIG, Settings, read_spark_defaults  # noqa: E402

DEFAULT_DIR = REPO / ".cache" / "cluster"
MARKER = "-Dlakehouse.cluster="
THRIFT_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
METASTORE_DB, METASTORE_USER = "metastore", "lakehouse"


class ClusterError(RuntimeError):
    """The cluster could not be started or stopped."""


_STARTED = time.monotonic()


def log(message: str) -> None:
    print(f"cluster: [{time.monotonic() - _STARTED:5.1f} s] {message}", flush=True)


# Ports are picked from here up to the kernel's ephemeral range (see free_port).
PORT_FLOOR = 20000
_picked: set[int] = set()


def ephemeral_floor() -> int:
    """The lowest port the kernel hands to outgoing connections and to bind(0)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port() -> int:
    """A free loopback port below the kernel's ephemeral range, not picked before by this
    process.

    A port from bind(0) is one the kernel also gives outgoing connections: between picking
    it and a daemon binding it, any client (another test's Kafka producer, a JDBC
    connection) may take it. CI saw the master's port taken that way; the master moved one
    up and its workers, told the port picked, never found it."""
    ceiling = max(ephemeral_floor(), PORT_FLOOR + 1000)
    for _ in range(500):
        port = random.randrange(PORT_FLOOR, ceiling)
        if port in _picked:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _picked.add(port)
        return port
    raise ClusterError(f"no free loopback port between {PORT_FLOOR} and {ceiling}")


_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
_MASTER_UI = re.compile(r"Bound MasterWebUI to \S+, and started at https?://[^:/\s]+:(\d+)")


def master_addresses(log_text: str) -> tuple[str, int] | None:
    """The master's URL and web UI port as its log reports them, once it has reported both.

    The ports asked for are only a first try: Spark moves a service to the next port when
    one is taken, and says where it went in the log."""
    url, ui = _MASTER_URL.search(log_text), _MASTER_UI.search(log_text)
    return (url.group(1), int(ui.group(1))) if url and ui else None


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def postgres_bin() -> Path:
    """The newest PostgreSQL server of Debian's packages."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parent.parent.name)
    )
    if not found:
        raise ClusterError("no PostgreSQL server in /usr/lib/postgresql: run `make setup-cluster`")
    return found[-1].parent


def wait_for(what: str, check, seconds: float, logs: Path | None = None):  # noqa: ANN001, ANN201
    """What ``check()`` returns once it is true; ClusterError (the log's tail) when it is
    not true within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(1)
    tail = ""
    if logs is not None and logs.exists():
        tail = "\n" + "\n".join(logs.read_text(errors="replace").splitlines()[-40:])
    raise ClusterError(f"{what} not ready after {seconds:.0f} s{tail}")


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Cluster:
    """The processes of one run folder."""

    def __init__(self, run_dir: Path, java_options: str = "") -> None:
        self.dir = run_dir.resolve()
        # Added to every JVM the cluster starts (see ``--java-options``).
        self.java_options = java_options
        self.logs = self.dir / "logs"
        self.state_file = self.dir / "state.json"
        self.state: dict = (
            json.loads(self.state_file.read_text()) if self.state_file.exists() else {}
        )

    def save(self) -> None:
        self.state_file.write_text(json.dumps(self.state, indent=2))

    # -- PostgreSQL -------------------------------------------------------------------

    def _as_postgres(self, command: list[str]) -> list[str]:
        # The server refuses to run as root: as root, run it as Debian's `postgres` user.
        return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command

    def start_postgres(self, password: str) -> int:
        bin_dir = postgres_bin()
        # A folder the postgres user can reach (a root-owned tmp path may not let it in).
        pg_dir = (
            Path(tempfile.mkdtemp(prefix="lakehouse-pg-"))
            if os.geteuid() == 0
            else (self.dir / "pg")
        )
        pg_dir.mkdir(exist_ok=True)
        self.state["pg_dir"] = str(pg_dir)
        self.save()
        if os.geteuid() == 0:
            shutil.chown(pg_dir, "postgres", "postgres")
        port = free_port()
        data, sock = pg_dir / "data", pg_dir
        run = lambda cmd: subprocess.run(  # noqa: E731
            self._as_postgres(cmd), check=True, capture_output=True, text=True
        )
        pwfile = pg_dir / "pw"
        pwfile.write_text(password)
        if os.geteuid() == 0:
            shutil.chown(pwfile, "postgres", "postgres")
        pwfile.chmod(0o600)
        try:
            run(
                [
                    str(bin_dir / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    "postgres",
                    "-E",
                    "UTF8",
                    "--auth-local=trust",
                    "--auth-host=scram-sha-256",
                    "--no-instructions",
                ]
            )
            run(
                [
                    str(bin_dir / "pg_ctl"),
                    "-D",
                    str(data),
                    "-l",
                    str(pg_dir / "postgres.log"),
                    "-w",
                    "-t",
                    "120",
                    "-o",
                    f"-p {port} -k {sock} -c listen_addresses=127.0.0.1",
                    "start",
                ]
            )
            psql = [
                str(bin_dir / "psql"),
                "-h",
                str(sock),
                "-p",
                str(port),
                "-U",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-d",
                "postgres",
                "-c",
            ]
            # The password is hex from `secrets`: nothing to quote.
            run([*psql, f"create role {METASTORE_USER} login password '{password}'"])
            run([*psql, f"create database {METASTORE_DB} owner {METASTORE_USER}"])
        except subprocess.CalledProcessError as exc:
            raise ClusterError(f"PostgreSQL: {' '.join(exc.cmd)}: {exc.stderr.strip()}") from exc
        finally:
            pwfile.unlink(missing_ok=True)
        self.state["postgres"] = {"port": port, "bin": str(bin_dir), "data": str(data)}
        self.save()
        log(f"PostgreSQL {bin_dir.parent.name} on 127.0.0.1:{port} (database {METASTORE_DB})")
        return port

    def stop_postgres(self) -> None:
        pg = self.state.get("postgres")
        if pg and Path(pg["data"], "postmaster.pid").exists():
            subprocess.run(
                self._as_postgres(
                    [str(Path(pg["bin"]) / "pg_ctl"), "-D", pg["data"], "-m", "fast", "-w", "stop"]
                ),
                capture_output=True,
                text=True,
            )
        pg_dir = self.state.get("pg_dir")
        if pg_dir and Path(pg_dir).exists():
            log_file = Path(pg_dir) / "postgres.log"
            if log_file.exists():
                self.logs.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(log_file, self.logs / "postgres.log")
            if not Path(pg_dir).is_relative_to(self.dir):
                shutil.rmtree(pg_dir, ignore_errors=True)

    # -- Spark processes ----------------------------------------------------------------

    def spawn(self, name: str, command: list[str], env: Mapping[str, str]) -> int:
        """Start a process in a session of its own (so its group can be ended at once)."""
        self.logs.mkdir(parents=True, exist_ok=True)
        with (self.logs / f"{name}.log").open("ab") as out:
            process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(env),
                cwd=self.dir,
                start_new_session=True,
            )
        self.state.setdefault("processes", {})[name] = process.pid
        self.save()
        return process.pid

    def spark_env(self, daemon_memory: str = "384m") -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=str(self.logs),
            SPARK_CONF_DIR=str(self.dir / "conf"),  # empty: nothing from a global conf
            # The heap of the master and workers; spark-submit takes it for the Thrift
            # Server's driver too (over spark.driver.memory).
            SPARK_DAEMON_MEMORY=daemon_memory,
            SPARK_DAEMON_JAVA_OPTS=self.jvm_options(),
            PYSPARK_PYTHON=sys.executable,
        )
        (self.dir / "conf").mkdir(exist_ok=True)
        return env

    def jvm_options(self) -> str:
        """A cluster JVM's options: the run folder's marker (``stop`` finds what is left by
        it), then ``--java-options``."""
        return f"{MARKER}{self.dir} {self.java_options}".strip()

    def master_json(self) -> dict:
        url = f"http://127.0.0.1:{self.state['master']['webui_port']}/json/"
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.load(response)

    def start_spark(self, workers: int, cores: int, memory: str) -> str:
        home, env = spark_home(), self.spark_env()
        port, webui = free_port(), free_port()
        spark_class = str(home / "bin" / "spark-class")
        master_log = self.logs / "master.log"
        # The log is appended to: only what this master writes counts.
        written_before = master_log.stat().st_size if master_log.exists() else 0
        self.spawn(
            "master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(webui),
            ],
            env,
        )

        def master_started() -> tuple[str, int] | None:
            with master_log.open("rb") as log_file:
                log_file.seek(written_before)
                return master_addresses(log_file.read().decode(errors="replace"))

        master_url, webui = wait_for("Spark master", master_started, 120, master_log)
        self.state["master"] = {"url": master_url, "webui_port": webui}
        self.save()
        for n in range(1, workers + 1):
            work = self.dir / f"worker-{n}"
            work.mkdir(exist_ok=True)
            self.spawn(
                f"worker-{n}",
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--webui-port",
                    str(free_port()),
                    "--cores",
                    str(cores),
                    "--memory",
                    memory,
                    "--work-dir",
                    str(work),
                    master_url,
                ],
                env,
            )

        def workers_alive() -> bool:
            try:
                alive = [w for w in self.master_json()["workers"] if w["state"] == "ALIVE"]
            except (OSError, ValueError, KeyError):  # not serving (its JSON) yet
                return False
            return len(alive) == workers

        wait_for(
            f"Spark master with {workers} workers", workers_alive, 180, self.logs / "master.log"
        )
        log(f"Spark master {master_url} (UI http://127.0.0.1:{webui}), {workers} workers")
        return master_url

    def start_thrift(self, settings: Settings) -> int:
        port = free_port()
        conf = {
            **spark_conf(settings),
            # Its own resources: one executor core, so the jobs' application gets the rest.
            "spark.cores.max": "1",
            "spark.executor.cores": "1",
            "spark.executor.memory": "1g",
            "spark.driver.memory": "1g",
            "spark.driver.extraJavaOptions": self.jvm_options(),
            **executor_options(self.java_options),
            "spark.master": settings.master,
            # Delta on the server's own class path (its jars are on this host): the Thrift
            # Server's sessions resolve Delta's catalog classes through a loader that does
            # not see `spark.jars.packages` (NoClassDefFoundError AbstractDeltaCatalogClient).
            # The metastore's JDBC driver is among them.
            "spark.driver.extraClassPath": os.pathsep.join(local_jars()),
        }
        props = self.dir / "thrift-server.conf"
        props.touch(mode=0o600)
        props.write_text("".join(f"{k} {v}\n" for k, v in conf.items()))
        self.spawn(
            "thrift-server",
            [
                str(spark_home() / "bin" / "spark-submit"),
                "--class",
                THRIFT_CLASS,
                "--name",
                "lakehouse-thrift-server",
                "--properties-file",
                str(props),
                "spark-internal",
                "--hiveconf",
                f"hive.server2.thrift.port={port}",
                "--hiveconf",
                "hive.server2.thrift.bind.host=127.0.0.1",
            ],
            self.spark_env(daemon_memory=conf["spark.driver.memory"]),
        )
        self.state["thrift"] = {"port": port}
        self.save()
        pid = self.state["processes"]["thrift-server"]

        def serving() -> bool:
            if not pid_alive(pid):
                raise ClusterError(
                    "Thrift Server exited:\n" + tail(self.logs / "thrift-server.log")
                )
            return port_open(port)

        wait_for("Spark Thrift Server", serving, 300, self.logs / "thrift-server.log")
        log(f"Spark Thrift Server on 127.0.0.1:{port}")
        return port

    # -- start / stop ---------------------------------------------------------------------

    def start(self, lake_root: str, workers: int, cores: int, memory: str) -> None:
        if self.state.get("processes") or self.state.get("postgres"):
            raise ClusterError(f"{self.dir} already has a cluster: stop it first")
        self.dir.mkdir(parents=True, exist_ok=True)
        password = os.environ.get("LAKEHOUSE_METASTORE_PASSWORD") or secrets.token_hex(16)
        pg_port = self.start_postgres(password)
        master_url = self.start_spark(workers, cores, memory)
        defaults = self.dir / "spark-defaults.conf"
        defaults.write_text(cluster_defaults(pg_port, self.java_options))
        environ = {**os.environ, "LAKEHOUSE_METASTORE_PASSWORD": password}
        settings = Settings(
            lake_root,
            master_url,
            DEFAULT_CONFIG,
            extra_conf=tuple(read_spark_defaults(defaults, environ)),
        )
        thrift_port = self.start_thrift(settings)
        env_file = self.dir / "cluster.env"
        env_file.touch(mode=0o600)
        env_file.write_text(
            "".join(
                f"{k}={v}\n"
                for k, v in {
                    "LAKEHOUSE_ROOT": lake_root,
                    "LAKEHOUSE_SPARK_MASTER": master_url,
                    "LAKEHOUSE_SPARK_DEFAULTS": str(defaults),
                    "LAKEHOUSE_METASTORE_PASSWORD": password,
                    "LAKEHOUSE_DBT_TARGET": "thrift",
                    "SPARK_THRIFT_HOST": "127.0.0.1",
                    "SPARK_THRIFT_PORT": str(thrift_port),
                    "SPARK_LOCAL_IP": "127.0.0.1",
                    "PYSPARK_PYTHON": sys.executable,
                    # The jobs' driver is a JVM of the cluster's too.
                    **(
                        {"LAKEHOUSE_DRIVER_JAVA_OPTIONS": self.java_options}
                        if self.java_options
                        else {}
                    ),
                }.items()
            )
        )
        self.state["lake_root"] = lake_root
        self.save()
        log(f"ready: set -a; . {env_file}; set +a")

    def stop(self) -> list[int]:
        """Stop everything; the pids that had to be ended by the final sweep."""
        for name, pid in reversed(list(self.state.get("processes", {}).items())):
            end_group(pid, name)
        self.stop_postgres()
        leftovers = marked_processes(self.dir, self.state.get("pg_dir"))
        for pid in leftovers:
            end_group(pid, f"leftover {pid}", group=False)
        still = marked_processes(self.dir, self.state.get("pg_dir"))
        self.state = {k: v for k, v in self.state.items() if k == "lake_root"}
        self.save()
        if still:
            raise ClusterError(f"processes still running after stop: {still}")
        log("stopped; nothing left running")
        return leftovers


def executor_options(java_options: str) -> dict[str, str]:
    """The executors' share of ``--java-options`` (no setting when there are none)."""
    return {"spark.executor.extraJavaOptions": java_options} if java_options else {}


def cluster_defaults(pg_port: int, java_options: str = "") -> str:
    """The jobs' Spark settings on this cluster (spark-defaults form; the password is
    named, and read from the environment when the settings are loaded); ``java_options``:
    their executors' JVM options."""
    settings = {
        **packages_conf(),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:postgresql://127.0.0.1:{pg_port}/{METASTORE_DB}",
        "spark.hadoop.javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
        "spark.driver.extraClassPath": metastore_driver_jar(),
        "spark.hadoop.javax.jdo.option.ConnectionUserName": METASTORE_USER,
        "spark.hadoop.javax.jdo.option.ConnectionPassword": "${LAKEHOUSE_METASTORE_PASSWORD}",
        # The metastore's tables are created on first use, each when first needed. Not
        # their foreign keys: DataNucleus adds those on a second connection, in the middle
        # of the first connection's transaction, and on PostgreSQL the ALTER TABLE then
        # waits forever for a lock that transaction holds (the first CREATE TABLE hangs).
        "spark.hadoop.datanucleus.schema.autoCreateAll": "false",
        "spark.hadoop.datanucleus.schema.autoCreateTables": "true",
        "spark.hadoop.datanucleus.schema.autoCreateColumns": "true",
        "spark.hadoop.datanucleus.schema.autoCreateConstraints": "false",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        # Small tasks: run them on any free executor at once rather than waiting up to
        # 3 s per stage for a "local" one (the default) -- here every slot is as local.
        "spark.locality.wait": "0s",
        # Two one-core executors: one on each worker (the master spreads them).
        "spark.cores.max": "2",
        "spark.executor.cores": "1",
        "spark.executor.memory": "1g",
        **executor_options(java_options),
    }
    lines = ["# The jobs' Spark settings on the loopback cluster (scripts/cluster.py)."]
    return "\n".join([*lines, *(f"{k} {v}" for k, v in settings.items())]) + "\n"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (our own child not reaped yet) is not running
        return _stat(str(pid))[0] != "Z"
    except OSError:
        return False


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no {path})"


def end_group(pid: int, name: str, group: bool = True, grace: float = 30) -> None:
    """SIGTERM the process (its group: a worker's executors too), SIGKILL after ``grace``."""
    kill = os.killpg if group else os.kill
    try:
        kill(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not pid_alive(pid) and not (group and group_alive(pid)):
            return
        time.sleep(0.3)
    log(f"{name} did not stop in {grace:.0f} s: killing")
    with contextlib.suppress(ProcessLookupError):
        kill(pid, signal.SIGKILL)


def _stat(pid: str) -> list[str]:
    """``/proc/PID/stat`` after the command name: [state, ppid, pgrp, ...]."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def group_alive(pgid: int) -> bool:
    """Whether a process of the group is still running (zombies waiting for their parent
    to reap them are not)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state, _, pgrp = _stat(entry.name)[:3]
        except (OSError, ValueError):
            continue
        if int(pgrp) == pgid and state != "Z":
            return True
    return False


def marked_processes(run_dir: Path, pg_dir: str | None) -> list[int]:
    """Processes whose command line or working folder is in the run folder (or the
    PostgreSQL folder): ours by construction. Never this process or its parents."""
    ours = {os.getpid()}
    pid = os.getpid()
    while pid > 1:
        try:
            pid = int(_stat(str(pid))[1])
        except (OSError, ValueError, IndexError):
            break
        ours.add(pid)
    marks = [str(run_dir)] + ([pg_dir] if pg_dir else [])
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in ours:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
            if _stat(entry.name)[0] == "Z":
                continue
        except OSError:
            continue
        if any(m in cmdline or cwd == m or cwd.startswith(m + "/") for m in marks):
            found.append(int(entry.name))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cluster.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("start", "stop", "status"):
        cmd = sub.add_parser(name)
        cmd.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="run folder")
    start = sub.choices["start"]
    start.add_argument(
        "--lake-root",
        default=(REPO / "lake-cluster").as_uri(),
        help="the lake the Thrift Server and the jobs share (default file://<repo>/lake-cluster)",
    )
    start.add_argument("--workers", type=int, default=2)
    start.add_argument("--worker-cores", type=int, default=2)
    start.add_argument("--worker-memory", default="2g")
    start.add_argument(
        "--java-options",
        default="",
        help="more options for every JVM of the cluster: the master, the workers, the "
        "Thrift Server and the executors, and (through cluster.env) the jobs' driver. For "
        "short runs on few cores, C1 alone and the Serial collector: --java-options="
        "'-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC' (C1 "
        "alone shrinks the code cache below what a silver build needs: keep it at 240m)",
    )
    args = parser.parse_args(argv)
    cluster = Cluster(args.dir, getattr(args, "java_options", ""))
    try:
        if args.command == "start":
            try:
                cluster.start(args.lake_root, args.workers, args.worker_cores, args.worker_memory)
            except BaseException:
                log("start failed: stopping what was started")
                cluster.stop()
                raise
        elif args.command == "stop":
            cluster.stop()
        else:
            print(json.dumps(cluster.state, indent=2))
    except ClusterError as exc:
        print(f"cluster: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
