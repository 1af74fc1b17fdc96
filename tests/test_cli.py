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
    assert {"ingest", "silver", "gold", "validate", "run", "report"} <= set(subcommands())


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


def test_a_second_run_on_the_same_lake_refuses_at_once(tmp_path: Path):
    import os
    import signal
    import time

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
    args = [*LAKEHOUSE, "--config", str(config), "--lake-root", str(tmp_path / "lake"), "run"]
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
