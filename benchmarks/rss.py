"""Resident memory of a process tree, sampled from /proc.

The Spark driver is a JVM that PySpark starts as a child of the Python process, so the
driver's memory is that of the tree (Python + JVM + anything they start), not of the
Python process alone.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").glob("*/children"))
    except OSError:  # the process ended while its tasks were listed
        return found
    for task in tasks:
        try:
            found += [int(p) for p in task.read_text().split()]
        except OSError:  # the task ended meanwhile
            continue
    return found


def tree_pids(root: int) -> list[int]:
    """``root`` and all its descendants that are alive now."""
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo += _children(pid)
    return pids


def tree_rss_bytes(root: int) -> int:
    """Resident bytes of the tree of ``root`` now (0 for processes that just ended)."""
    total = 0
    for pid in tree_pids(root):
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_BYTES
        except (OSError, IndexError, ValueError):
            continue
    return total


class RssSampler:
    """Samples the tree's RSS every ``interval`` seconds in a daemon thread.

    ``peak(start, end)`` is the highest sample taken between two ``time.time()`` values,
    so the phases of a run can be told apart after it, from their start and end times.
    """

    def __init__(self, root: int | None = None, interval: float = 0.2) -> None:
        self.root = root or os.getpid()
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.time(), tree_rss_bytes(self.root)))
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append((time.time(), tree_rss_bytes(self.root)))

    def peak(self, start: float = 0.0, end: float = float("inf")) -> int:
        """Highest RSS (bytes) sampled in ``[start, end]`` (0 without a sample there)."""
        return max((rss for t, rss in self.samples if start <= t <= end), default=0)
