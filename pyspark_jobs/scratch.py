"""Each driver's scratch folder, and the sweep of the ones killed drivers left behind.

Spark removes its scratch (the copies of the jars it serves its tasks, shuffle and spill
files) and the JVM its temporary files (the native libraries snappy and zstd unpack) only
as the JVM exits: a command killed with SIGKILL (``kill -9``, the out-of-memory killer)
leaves them in the temporary folder, 20 MB of jar copies a kill (docs/operations.md). So
each process's driver gets a folder of its own, ``<temp>/cdc-lakehouse-<uid>/<host>-<pid>-
<start>``, as the JVM's ``java.io.tmpdir``, which is also Spark's folder unless
``spark.local.dir`` or ``SPARK_LOCAL_DIRS`` names another; starting a session removes the
folders of this host's processes that no longer run, and ending one removes its own.

A process is told apart from a later one given the same pid by its start time
(``/proc/<pid>/stat``). Without ``/proc`` nothing is swept and Spark keeps its default
folders.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import tempfile
from contextlib import suppress
from pathlib import Path

# The driver JVM's own pid and start time, written once it runs: a JVM still ending after
# its Python process was killed keeps its folder until it has gone too.
JVM_RECORD = "jvm"
_OWNER = re.compile(r"^(?P<host>.+)-(?P<pid>\d+)-(?P<start>\d+)$")


def scratch_root() -> Path:
    """Where this user's drivers keep their scratch folders (``TMPDIR`` is honoured)."""
    return Path(tempfile.gettempdir()) / f"cdc-lakehouse-{os.getuid()}"


def start_time(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot, None when it does not
    run (or this system has no ``/proc``). A zombie does not run: a killed JVM whose
    parent died with it stays one until something reaps it (in a container, late or never)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (in parentheses) may hold spaces: fields count from after it.
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def _host() -> str:
    return socket.gethostname().replace("/", "_")


def _owner_runs(folder: Path, pid: int, start: str) -> bool:
    if start_time(pid) == start:
        return True
    try:
        jvm_pid, jvm_start = (folder / JVM_RECORD).read_text().split()
    except (OSError, ValueError):
        return False
    return start_time(int(jvm_pid)) == jvm_start


def sweep(root: Path) -> list[Path]:
    """Remove the folders under ``root`` of this host's processes that no longer run;
    the folders removed. Other hosts' folders (a temporary folder shared between
    machines) and names this module did not make are left alone."""
    if start_time(os.getpid()) is None:
        return []
    removed = []
    host = _host()
    for folder in sorted(root.glob("*")) if root.is_dir() else []:
        owner = _OWNER.match(folder.name)
        if owner is None or owner["host"] != host or not folder.is_dir():
            continue
        if not _owner_runs(folder, int(owner["pid"]), owner["start"]):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def own_folder() -> Path | None:
    """This process's scratch folder (not created), None without ``/proc``."""
    start = start_time(os.getpid())
    if start is None:
        return None
    return scratch_root() / f"{_host()}-{os.getpid()}-{start}"


def _private(root: Path) -> bool:
    # A folder someone else made (or a link) in a shared /tmp is not ours to write into.
    info = root.lstat()
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()


def prepare() -> Path | None:
    """Sweep the dead drivers' folders and create this process's own (private to the
    user); the folder, or None when this system cannot tell which processes run or the
    temporary folder cannot hold it (Spark then keeps its default folders)."""
    folder = own_folder()
    if folder is None:
        return None
    root = folder.parent
    try:
        root.mkdir(mode=0o700, exist_ok=True)
        if not _private(root):
            return None
        sweep(root)
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None
    return folder


def record_jvm(folder: Path, pid: int) -> None:
    """Note the driver JVM's pid and start time in ``folder`` (not noted when it cannot
    be written: the folder then lives as long as the Python process)."""
    start = start_time(pid)
    if start is not None:
        with suppress(OSError):
            (folder / JVM_RECORD).write_text(f"{pid} {start}\n")


def remove_own() -> None:
    """Remove this process's folder (its JVM has ended)."""
    folder = own_folder()
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
