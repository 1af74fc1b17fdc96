"""A killed driver's scratch (jar copies, shuffle files, the JVM's temporary files) is
removed by the next session on the host, and an ended one's by itself."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pyspark_jobs import scratch


def _folder(root: Path, pid: int, start: str, host: str | None = None) -> Path:
    folder = root / f"{host or socket.gethostname()}-{pid}-{start}"
    folder.mkdir(parents=True)
    (folder / "blockmgr-1").mkdir()
    return folder


def _ended_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_sweep_removes_the_folders_of_this_hosts_processes_that_no_longer_run(tmp_path: Path):
    me = os.getpid()
    started = scratch.start_time(me)
    assert started is not None
    alive = _folder(tmp_path, me, started)
    ended = _folder(tmp_path, _ended_pid(), "1")
    # The same pid given to a later process: told apart by its start time.
    reused = _folder(tmp_path, me, str(int(started) - 1))
    other_host = _folder(tmp_path, _ended_pid(), "1", host="another-host")
    not_ours = tmp_path / "spark-1234"
    not_ours.mkdir()

    removed = scratch.sweep(tmp_path)

    assert sorted(removed) == sorted([ended, reused])
    assert alive.is_dir() and other_host.is_dir() and not_ours.is_dir()
    assert not ended.exists() and not reused.exists()


def test_a_folder_whose_python_ended_stays_while_its_jvm_runs(tmp_path: Path):
    folder = _folder(tmp_path, _ended_pid(), "1")
    scratch.record_jvm(folder, os.getpid())  # a JVM still ending after its Python was killed
    assert scratch.sweep(tmp_path) == []
    (folder / scratch.JVM_RECORD).write_text(f"{_ended_pid()} 1\n")
    assert scratch.sweep(tmp_path) == [folder]


def _stat_fields(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name: state first."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def test_a_zombie_does_not_run(tmp_path: Path):
    """A killed JVM whose Python process was killed with it stays a zombie until
    something reaps it (in a container, late or never): its folder is swept all the same."""
    child = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + 10
        while (fields := _stat_fields(child.pid))[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        folder = _folder(tmp_path, child.pid, fields[19])
        assert scratch.start_time(child.pid) is None
        assert scratch.sweep(tmp_path) == [folder]
    finally:
        child.wait()


def test_a_temporary_folder_that_cannot_hold_the_scratch_leaves_spark_its_default(
    tmp_path: Path, monkeypatch
):
    """Someone else's folder (or a file) under the scratch's name in a shared temporary
    folder is not written into, and a temporary folder that cannot be written does not
    stop a command: Spark then keeps its default folders."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    taken = scratch.scratch_root()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    taken.symlink_to(elsewhere)  # a link planted under the name
    assert scratch.prepare() is None
    assert list(elsewhere.iterdir()) == []
    taken.unlink()
    elsewhere.rmdir()
    taken.write_text("not a folder")
    assert scratch.prepare() is None
    # A folder that cannot be made (inside a file: refused to root too).
    monkeypatch.setattr(scratch, "scratch_root", lambda: taken / "inside")
    assert scratch.prepare() is None
    assert [p.name for p in tmp_path.iterdir()] == [taken.name]


SESSION = (
    "import sys, time\n"
    "from pyspark_jobs import scratch\n"
    "from pyspark_jobs.session import end_jvm, get_spark\n"
    "from pyspark_jobs.settings import Settings\n"
    "get_spark(Settings.from_env()).range(10).repartition(2).count()\n"
    "print(scratch.own_folder(), flush=True)\n"
    "if sys.argv[1] == 'wait':\n"
    "    time.sleep(600)\n"
    "end_jvm()\n"
)


def test_a_killed_drivers_scratch_is_swept_by_the_next_session_and_an_ended_one_removes_its_own(
    tmp_path: Path,
):
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "LAKEHOUSE_ROOT": str(tmp_path / "lake")}
    (tmp_path / "tmp").mkdir()
    killed = subprocess.Popen(
        [sys.executable, "-c", SESSION, "wait"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert killed.stdout is not None
        folder = Path(killed.stdout.readline().strip())
    finally:
        os.killpg(killed.pid, signal.SIGKILL)  # the Python process and its JVM
        killed.wait()
    # What Spark would have left in /tmp: the copies of the jars it serves its tasks.
    assert folder.parent == tmp_path / "tmp" / f"cdc-lakehouse-{os.getuid()}"
    assert list(folder.glob("spark-*/userFiles-*/*.jar")), sorted(folder.rglob("*"))

    ended = subprocess.run(
        [sys.executable, "-c", SESSION, "end"], env=env, capture_output=True, text=True, timeout=300
    )

    assert ended.returncode == 0, ended.stderr[-3000:]
    # Naming spark.local.dir made Spark warn at every start that a cluster manager may
    # override it: the scratch is the JVM's temporary folder instead, Spark's default.
    assert "spark.local.dir" not in ended.stderr
    assert not folder.exists()
    assert not Path(ended.stdout.strip()).exists()
    assert list(folder.parent.iterdir()) == []
