"""The `lakehouse` command as a user meets it: help on every subcommand, clear errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pyspark_jobs.cli import build_parser

LAKEHOUSE = [sys.executable, "-m", "pyspark_jobs.cli"]


def subcommands() -> list[str]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return sorted(action.choices)  # type: ignore[union-attr]


def test_every_subcommand_the_issue_names_exists():
    assert {
        "ingest",
        "silver",
        "gold",
        "validate",
        "run",
        "report",
        "maintain",
        "replay-rejects",
    } <= set(subcommands())


@pytest.mark.parametrize("command", subcommands())
def test_help_on_every_subcommand(command: str):
    out = subprocess.run([*LAKEHOUSE, command, "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert f"usage: lakehouse {command}" in out.stdout


def test_missing_config_is_one_line_and_exit_2(tmp_path: Path):
    out = subprocess.run(
        [*LAKEHOUSE, "--config", str(tmp_path / "none.yml"), "--lake-root", str(tmp_path), "gold"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert (
        out.stderr.strip()
        == f"lakehouse: config error: {tmp_path / 'none.yml'}: config file not found"
    )


def test_invalid_config_names_the_key(tmp_path: Path):
    config = tmp_path / "sources.yml"
    config.write_text("sources:\n  - name: x\n    format: nope\n")
    out = subprocess.run(
        [*LAKEHOUSE, "--config", str(config), "--lake-root", str(tmp_path), "run"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "sources[x].format: expected one of debezium" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def _one_record_source(tmp_path: Path) -> list[str]:
    """The ``lakehouse`` command line for a lake in ``tmp_path`` whose one source (DB2,
    landing files) holds one record; append the subcommand."""
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "a.jsonl").write_text(
        '{"topic":"t","partition":0,"offset":0,"key":null,"value":null}\n'
    )
    config = tmp_path / "config" / "sources.yml"
    config.parent.mkdir()
    config.write_text(
        "sources:\n  - name: only\n    format: db2\n    landing: landing\n    entities:\n"
        "      - {name: t, table: t, key: [id], columns: {id: bigint}}\n"
    )
    return [*LAKEHOUSE, "--config", str(config), "--lake-root", str(tmp_path / "lake")]


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:  # ended meanwhile
        return ""


def test_a_command_returns_after_its_jvm_so_the_next_one_finds_the_metastore_free(
    tmp_path: Path,
):
    """`lakehouse ingest && lakehouse validate ...` as a cron script chains them: the
    first JVM used to outlive its command by half a second, holding Derby, and the second
    command refused with exit 3."""
    import os

    from pyspark_jobs.locks import derby_in_use

    command = _one_record_source(tmp_path)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    ingest = subprocess.run([*command, "ingest"], env=env, capture_output=True, text=True)
    assert ingest.returncode == 0, ingest.stderr[-3000:]
    # Output to a file, as a shell script's: a pipe would make this wait for the JVM too,
    # which keeps the pipe open until it ends.
    out = tmp_path / "validate.out"
    with out.open("w") as sink:
        gate = subprocess.run(
            [*command, "validate", "--layer", "bronze"], env=env, stdout=sink, stderr=sink
        )
    assert gate.returncode == 0, out.read_text()[-3000:]
    assert "lakehouse validate: done" in out.read_text()
    # The JVM names the lake in its command line (Derby's log file): none is left.
    lake = str(tmp_path / "lake")
    assert [p for p in Path("/proc").glob("[0-9]*") if lake in _cmdline(p)] == []
    assert not derby_in_use(tmp_path / "lake" / "metastore_db")


def test_a_second_run_on_the_same_lake_refuses_at_once(tmp_path: Path):
    import os
    import signal
    import time

    args = [*_one_record_source(tmp_path), "run"]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    first = subprocess.Popen(
        args, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        lock = tmp_path / "lake" / "_state" / "locks" / "ingest-only.lock"
        deadline = time.time() + 60
        while not (lock.exists() and lock.read_text().strip()) and time.time() < deadline:
            time.sleep(0.1)
        started = time.time()
        second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 3
        assert time.time() - started < 10
        assert f"an ingest of source 'only' is already running (pid {first.pid}" in second.stderr
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()


def _listing(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else None for p in root.rglob("*")
    }


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (
            "a table name holding SQL",
            "lakehouse: config error: {config}: sources[only].entities[0].table: expected an "
            "identifier matching [A-Za-z_][A-Za-z0-9_]*, got 't`; drop table gold.t; --'",
        ),
        (
            "a landing path escaping the repo",
            "lakehouse: config error: {config}: sources[only].landing: expected a folder inside "
            "the repo or an absolute path, without '..', got '../../../etc'",
        ),
        (
            "a lake root that is a file",
            "lakehouse: settings error: lake root '{lake}': expected a folder, it is a file",
        ),
    ],
    ids=("table-holding-sql", "landing-escaping-repo", "lake-root-is-a-file"),
)
def test_config_abuse_exits_2_before_spark_and_writes_nothing(
    tmp_path: Path, case: str, expected: str
):
    """The real command: one line on stderr, exit 2, no JVM started (nothing written in
    the working directory either: no derby.log, no metastore)."""
    import time

    config = tmp_path / "config" / "sources.yml"
    config.parent.mkdir()
    table = "'t`; drop table gold.t; --'" if "SQL" in case else "t"
    landing = "../../../etc" if "escaping" in case else "landing"
    config.write_text(
        f"sources:\n  - name: only\n    format: db2\n    landing: {landing}\n    entities:\n"
        f"      - {{name: t, table: {table}, key: [id], columns: {{id: bigint}}}}\n"
    )
    lake = tmp_path / "lake"
    if "file" in case:
        lake.write_text("a file, not a folder\n")
    before = _listing(tmp_path)
    started = time.time()
    out = subprocess.run(
        [*LAKEHOUSE, "--config", str(config), "--lake-root", str(lake), "run"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.splitlines() == [expected.format(config=config, lake=lake)]
    assert out.stdout == ""
    assert _listing(tmp_path) == before
    assert time.time() - started < 30  # a JVM and a run take minutes


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--compact-files", "5"], "lakehouse run: --compact-files needs --every"),
        (["--maintain-every", "60"], "lakehouse run: --maintain-every needs --every"),
        (
            ["--every", "30", "--compact-files", "-1"],
            "lakehouse run: error: argument --compact-files: must be 0 or more: '-1'",
        ),
        (
            ["--every", "30", "--compact-files", "many"],
            "lakehouse run: error: argument --compact-files: not a whole number: 'many'",
        ),
    ],
)
def test_loop_only_flags_are_refused_before_spark(tmp_path: Path, flags: list[str], expected: str):
    """The continuous loop's flags: refused without ``--every`` or with a bad count, exit 2
    and one line naming the flag, before a JVM starts."""
    out = subprocess.run(
        [*LAKEHOUSE, "--lake-root", str(tmp_path / "lake"), "run", *flags],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.splitlines()[-1] == expected
    assert not (tmp_path / "lake").exists()
