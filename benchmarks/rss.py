"""Resident memory of a process tree, sampled from /proc.

The Spark driver is a JVM that PySpark starts as a child of the Python process, so the
driver's memory is that of the tree (Python + JVM + anything they start), not of the
Python process alone.

A child that has not yet run a program of its own is left out: it still runs its
parent's (the same executable and command line), in its parent's memory. The JVM starts
every external command (Hadoop's `chmod` for each file it writes on the local file
system) with posix_spawn, whose child shares the JVM's address space until it execs, so
/proc shows it with the JVM's whole RSS: a sample that caught one counted the driver
twice (docs/performance.md, 2026-12-03: the bench reported 5.47 GiB for the 1M backfill,
which peaks at 3.34 GiB counted once).
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


def _program(pid: int) -> tuple[str, bytes] | None:
    """The executable and command line ``pid`` runs (None once it has ended)."""
    try:
        return os.readlink(f"/proc/{pid}/exe"), Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None


def own_memory_pids(root: int) -> list[int]:
    """``root`` and its descendants alive now, without the children that still run their
    parent's program (forked or spawned, not yet exec'd: their pages are the parent's)."""
    pids, todo = [], [(root, _program(root))]
    while todo:
        pid, program = todo.pop()
        pids.append(pid)
        for child in _children(pid):
            child_program = _program(child)
            if program is not None and child_program == program:
                # its own children may have exec'd: they are looked at as its parent's
                todo += [(grandchild, _program(grandchild)) for grandchild in _children(child)]
            else:
                todo.append((child, child_program))
    return pids


def tree_rss_bytes(root: int) -> int:
    """Resident bytes of the tree of ``root`` now (0 for processes that just ended),
    each address space counted once (``own_memory_pids``)."""
    total = 0
    for pid in own_memory_pids(root):
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
