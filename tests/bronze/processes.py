"""Run the real ``lakehouse`` CLI as a child process group, and kill it like an operator would."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from pyspark_jobs.settings import PROJECT_ROOT

LAKEHOUSE = PROJECT_ROOT / ".venv" / "bin" / "lakehouse"


class Lakehouse:
    """One ``lakehouse`` process in its own session; stdout lines collected as they come.

    The Spark JVM is a child of the Python process in the same process group, so killing
    the group kills both: nothing survives to hold the Derby metastore's lock.
    """

    def __init__(self, lake: Path, config: Path, *args: str) -> None:
        env = {
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "LAKEHOUSE_SPARK_MASTER": "local[1]",
            "LAKEHOUSE_SHUFFLE_PARTITIONS": "1",
        }
        self.proc = subprocess.Popen(
            [str(LAKEHOUSE), "--lake-root", str(lake), "--config", str(config), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.errors: list[str] = []
        self._readers = [
            threading.Thread(target=self._collect, args=(stream, into), daemon=True)
            for stream, into in ((self.proc.stdout, self.lines), (self.proc.stderr, self.errors))
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _collect(stream, into: list[str]) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            into.append(line.rstrip("\n"))

    def wait_for(self, predicate, timeout: float) -> bool:  # type: ignore[no-untyped-def]
        """Wait until a stdout line satisfies ``predicate``; False if the process ended first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(predicate(line) for line in list(self.lines)):
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.05)
        raise TimeoutError(f"no such line within {timeout} s; got {self.lines} {self.errors[-5:]}")

    def kill_group(self) -> None:
        """SIGKILL the Python process and its JVM, and wait until both are gone."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while group_alive(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not group_alive(self.proc.pid), "a process of the killed group survived"

    def finish(self, timeout: float) -> int:
        """Wait for the exit code (killing the group on timeout) and the last output."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill_group()
            raise
        for reader in self._readers:
            reader.join(timeout=10)
        return code


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process still belongs to process group ``pgid``."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False
