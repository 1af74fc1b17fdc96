"""``lakehouse run --every`` in a process of its own, for the measurements of continuous
mode (freshness, warm cycles): its output lines as they arrive, and the cycles in them."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from benchmarks.child import child_env


class OutputLines:
    """A process's output lines with the time each arrived."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.time(), line.rstrip("\n")))

    def wait_for(
        self, wanted: Callable[[str], bool], after: float, timeout: float
    ) -> tuple[float, str]:
        """The first line arrived after ``after`` for which ``wanted(line)`` holds."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            for at, line in list(self.lines):
                if at > after and wanted(line):
                    return at, line
            if self.proc.poll() is not None:
                self._reader.join(timeout=5)
                tail = "\n".join(line for _, line in self.lines[-15:])
                raise RuntimeError(f"lakehouse run --every ended early:\n{tail}")
            time.sleep(0.1)
        raise TimeoutError(f"lakehouse run --every: no such line within {timeout} s")


def cycle_end(line: str) -> bool:
    return line.startswith("cycle ") and " in " in line and not line.endswith("started")


def cycle_seconds(line: str) -> float:
    """The wall time a ``cycle N: <outcome> in S s`` line reports."""
    return float(line.rsplit(" in ", 1)[1].split()[0])


@contextmanager
def continuous_run(
    lake: Path,
    config: Path,
    every: float,
    log: Path,
    timeout: float,
    conf: Mapping[str, str] | None = None,
) -> Iterator[OutputLines]:
    """``lakehouse run --every`` on ``lake`` with ``config`` (and the Spark settings
    ``conf``), its output as it arrives; on leaving the block it is stopped as a user
    would (SIGTERM: the cycle in flight ends first), its output kept in ``log``. Raises
    when it exits with an error."""
    settings = [arg for key, value in (conf or {}).items() for arg in ("--conf", f"{key}={value}")]
    command = [
        str(Path(sys.executable).with_name("lakehouse")),
        "--lake-root", str(lake), "--config", str(config), *settings,
        "run", "--every", str(every),
    ]  # fmt: skip
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=child_env(),
        start_new_session=True,
    )
    output = OutputLines(proc)
    try:
        yield output
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.write_text("\n".join(line for _, line in output.lines) + "\n")
    if code != 0:
        raise RuntimeError(f"lakehouse run --every exited {code}; see {log}")
