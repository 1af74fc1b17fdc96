"""A real single-node Apache Kafka broker (KRaft, loopback only) for integration tests.

Why not Docker or a mock: the Spark Kafka source is tested against the same broker code that
runs in production, and the machines this project runs on have no Docker engine. The broker
jars come from Maven Central via scripts/fetch_kafka_broker.sh into .cache/kafka-broker/.

    with KafkaBroker(tmp_path) as broker:
        broker.create_topic("orders", partitions=2)
        broker.produce("orders", [(b"k", b"v", 0), (b"k", None, 0)])  # None value = tombstone
        spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap_servers)

Manual use (from the repo root):
    python -m tests.support.kafka_broker start --dir /tmp/kafka   # prints 127.0.0.1:PORT
    python -m tests.support.kafka_broker stop --dir /tmp/kafka
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

REPO_ROOT = Path(__file__).resolve().parents[2]
JARS_DIR = REPO_ROOT / ".cache" / "kafka-broker"
PID_FILE = "broker.pid"
LOG_FILE = "broker.log"

# (key, value, partition); a None value is sent as a tombstone, a None partition lets the
# producer's partitioner choose.
Record = tuple[bytes | None, bytes | None, int | None]


class KafkaBrokerError(RuntimeError):
    """The broker could not be set up, started or stopped."""


def free_ports(count: int) -> list[int]:
    """Ask the kernel for ``count`` distinct free loopback ports.

    The sockets stay bound until all are picked: closed one by one, the kernel may hand the
    same port out twice, and Kafka refuses two listeners on one port (seen on CI). A tiny race
    remains until the JVM binds them; fine here."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _cluster_id() -> str:
    """A Kafka-style cluster id (URL-safe base64 of a UUID); a leading '-' would parse as a flag."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


# Looked up before fork: loading libraries in the forked child of a threaded process can hang.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL the JVM if the Python process dies, so a crashed test leaves nothing."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no broker log)"


class KafkaBroker:
    """One JVM running broker + KRaft controller, with all state and logs under `work_dir`."""

    def __init__(
        self,
        work_dir: str | Path,
        *,
        heap: str = "512m",
        start_timeout: float = 60.0,
        stop_timeout: float = 20.0,
        jars_dir: Path = JARS_DIR,
        die_with_parent: bool = True,
    ) -> None:
        self.work_dir = Path(work_dir).resolve()
        self.heap = heap
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.jars_dir = jars_dir
        self.die_with_parent = die_with_parent
        self.port = 0
        self.controller_port = 0
        self.log_path = self.work_dir / LOG_FILE
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        if not self.port:
            raise KafkaBrokerError("broker not started")
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def _java(self, heap: str) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise KafkaBrokerError("`java` (17+) not found on PATH")
        if not any(self.jars_dir.glob("kafka_2.13-*.jar")):
            raise KafkaBrokerError(
                f"Kafka broker jars not found in {self.jars_dir}: "
                "run `make setup` (scripts/fetch_kafka_broker.sh) first"
            )
        return [
            java,
            f"-Xmx{heap}",
            "-XX:+UseSerialGC",  # 2-core CI boxes: no parallel GC threads competing with Spark
            # C1 alone: the broker carries a few records, and C2's compiles cost CPU the
            # tests beside it need (a start, 20 s idle and a stop: 8.8 -> 5.3-5.9 s of CPU).
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            f"-Dlog4j.configuration={(self.work_dir / 'log4j.properties').as_uri()}",
            "-cp",
            f"{self.jars_dir}/*",
        ]

    def _write_config(self) -> Path:
        """Combined broker+controller on loopback; replication factors of 1 (single node)."""
        data = self.work_dir / "data"
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(data),
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": "1",
            # The default 50 partitions of __consumer_offsets make the first consumer group
            # take seconds on a small box.
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
        }
        path = self.work_dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.work_dir / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, stdout\n"
            "log4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            "log4j.logger.kafka.request.logger=WARN\n"
            "log4j.logger.state.change.logger=WARN\n"
        )
        return path

    def start(self) -> KafkaBroker:
        """Write config, format KRaft storage, launch the JVM, wait until it serves requests."""
        if self._proc is not None:
            raise KafkaBrokerError("broker already started")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if not self.port:  # a restart keeps its ports: clients know the broker by them
            self.port, self.controller_port = free_ports(2)
        config = self._write_config()
        if not (self.work_dir / "data" / "meta.properties").exists():  # else: reuse old data
            fmt = subprocess.run(
                [*self._java("256m"), "kafka.tools.StorageTool", "format",
                 "-t", _cluster_id(), "-c", str(config)],
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
            if fmt.returncode != 0:
                out = "\n".join((fmt.stdout + fmt.stderr).splitlines()[-20:])
                raise KafkaBrokerError(f"formatting KRaft storage failed:\n{out}")
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                [*self._java(self.heap), "kafka.Kafka", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.work_dir,
                start_new_session=True,  # Ctrl-C in a terminal must not race our orderly stop
                preexec_fn=_die_with_parent if self.die_with_parent else None,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        """Poll until the PLAINTEXT listener answers a metadata request, or fail with the log."""
        from kafka.admin import KafkaAdminClient

        deadline = time.monotonic() + self.start_timeout
        assert self._proc is not None
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise KafkaBrokerError(
                    f"Kafka broker exited with code {self._proc.returncode}; "
                    f"tail of {self.log_path}:\n{_tail(self.log_path)}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
                admin = KafkaAdminClient(
                    bootstrap_servers=self.bootstrap_servers, request_timeout_ms=5000
                )
                try:
                    if admin.describe_cluster().get("brokers"):
                        return
                finally:
                    admin.close()
            except Exception:  # not listening yet / still electing the controller
                pass
            time.sleep(0.2)
        raise KafkaBrokerError(
            f"Kafka broker did not accept connections on {self.bootstrap_servers} within "
            f"{self.start_timeout:.0f}s; tail of {self.log_path}:\n{_tail(self.log_path)}"
        )

    def stop(self) -> None:
        """SIGTERM (clean shutdown), then SIGKILL after `stop_timeout`; always reaps the JVM."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self, down_seconds: float = 0.0, *, crash: bool = True) -> None:
        """Take the broker down (SIGKILL when ``crash``, else a clean stop), wait
        ``down_seconds``, and start it again on the same ports and data."""
        if crash and self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None
        self.stop()
        time.sleep(down_seconds)
        self.start()

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create a topic explicitly (auto-create would give 1 partition) and wait for leaders."""
        from kafka.admin import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers)
        try:
            admin.create_topics(
                {name: {"num_partitions": partitions, "replication_factor": 1}},
                wait_for_metadata=True,
            )
        finally:
            admin.close()

    def produce(self, topic: str, records: Iterable[Record]) -> list[tuple[int, int]]:
        """Send records with acks=all and flush; returns (partition, offset) per record."""
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap_servers, acks="all")
        try:
            futures = [
                producer.send(topic, key=key, value=value, partition=partition)
                for key, value, partition in records
            ]
            producer.flush()
            metas = [f.get(timeout=30) for f in futures]
        finally:
            producer.close()
        return [(m.partition, m.offset) for m in metas]


def _is_our_broker(pid: int) -> bool:
    """Guard against a recycled pid: only signal a JVM running kafka.Kafka."""
    try:
        return b"kafka.Kafka" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _alive(pid: int) -> bool:
    """True until the process is gone or a zombie (its cmdline vanishes earlier, mid-exit)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def stop_by_pid_file(work_dir: Path, timeout: float = 20.0) -> bool:
    """Stop a broker started by `start --dir`; returns whether one was running."""
    pid_file = work_dir / PID_FILE
    if not pid_file.exists():
        return False
    pid = int(pid_file.read_text().strip())
    running = _is_our_broker(pid)
    if running:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    pid_file.unlink()
    return running


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.kafka_broker")
    parser.add_argument("command", choices=["start", "stop"])
    parser.add_argument("--dir", required=True, type=Path, help="work dir (config, data, logs)")
    args = parser.parse_args(argv)
    work_dir: Path = args.dir.resolve()
    if args.command == "stop":
        print("stopped" if stop_by_pid_file(work_dir) else "no broker running", file=sys.stderr)
        return 0
    stop_by_pid_file(work_dir)  # restarting over a stale broker would clash on the data dir
    broker = KafkaBroker(work_dir, die_with_parent=False).start()
    (work_dir / PID_FILE).write_text(f"{broker.pid}\n")
    print(broker.bootstrap_servers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
