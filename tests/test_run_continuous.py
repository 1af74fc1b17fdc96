"""``lakehouse run --every``: warm cycles, a file landed mid-run reaches gold, SIGTERM ends
the loop after the cycle in flight, and the tables compacted between two cycles
(``--compact-files``) change nothing the next cycle reads or applies."""

from __future__ import annotations

import json
import os
import signal
from datetime import datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pyspark_jobs.gold.apply import TableApply
from tests.bronze.processes import Lakehouse
from tests.conftest import copy_of_samples

pytestmark = pytest.mark.slow

# A user the samples do not have, changed after everything in them.
NEW_USER_TS = 1700000009000
NEW_USER = {
    "topic": "shop.public.users",
    "partition": 0,
    "offset": 100,
    "timestamp": NEW_USER_TS + 5,
    "key": {"USER_ID": 500},
    "value": {
        "op": "c",
        "before": None,
        "after": {"USER_ID": 500, "TAX_CODE": "tc-500", "NAME": "Neo", "COINS": 1},
        "source": {"ts_ms": NEW_USER_TS, "db": "shop", "table": "users", "lsn": 9000},
    },
}
GOLD_COLUMNS = ["USER_ID", "TAX_CODE", "NAME", "COINS", "_record_key", "_seq", "_event_ts"]
# The samples' net state (as in test_pipeline_e2e) plus the new user.
EXPECTED_GOLD = [
    (123, "the-fiscal-code-123", "Mario", 300000500, '{"USER_ID":"123"}',
     [1700000003000, 1030, 3], datetime(2023, 11, 14, 22, 13, 23)),
    (124, "the-fiscal-code-124", "Lara Croft", 42, '{"USER_ID":"124"}',
     [1700000005000, 1050, 6], datetime(2023, 11, 14, 22, 13, 25)),
    (500, "tc-500", "Neo", 1, '{"USER_ID":"500"}',
     [NEW_USER_TS, 9000, 100], datetime(2023, 11, 14, 22, 13, 29)),
]  # fmt: skip


def _land(landing: Path, name: str, record: dict) -> None:
    """Write a landing file whole, as a producer should: written aside, then renamed."""
    aside = landing.parent / f".{name}"
    aside.write_text(json.dumps(record) + "\n")
    os.replace(aside, landing / name)


def test_cycles_pick_up_a_landed_file_and_sigterm_ends_after_the_cycle(
    spark: SparkSession, tmp_path: Path
) -> None:
    config = copy_of_samples(tmp_path, sources=["shop_debezium"])
    landing = config.source("shop_debezium").landing
    assert landing is not None
    lake = tmp_path / "lake"
    # Every table holding a file is compacted after cycle 1 (not after the last cycle).
    running = Lakehouse(
        lake, tmp_path / "config" / "sources.yml", "run", "--every", "1", "--compact-files", "1"
    )
    try:
        # Cycle 1's bronze is over once gold reports: a file landed now is the next
        # cycle's, and that cycle is asked to stop as soon as it starts.
        assert running.wait_for(lambda line: line.startswith("gold gold.users: "), 600)
        _land(landing, "late.jsonl", NEW_USER)
        assert running.wait_for(lambda line: line == "cycle 2: started", 600)
        running.proc.send_signal(signal.SIGTERM)
        code = running.finish(timeout=600)
    finally:
        if running.proc.poll() is None:
            running.kill_group()
    assert code == 0, running.errors[-10:]

    cycle_lines = [line for line in running.lines if line.startswith("cycle ")]
    assert [line.split(" in ")[0] for line in cycle_lines] == [
        "cycle 1: started",
        "cycle 1: succeeded",
        "cycle 2: started",
        "cycle 2: succeeded",
    ]
    assert "run --every: stop requested; ended after cycle 2" in running.lines
    # Between the cycles, and nothing after the last one.
    compaction = ("compacted ", "compaction of ")
    cycle_2 = running.lines.index("cycle 2: started")
    compacted = {
        line.split(":")[0].split()[-1]
        for line in running.lines[:cycle_2]
        if line.startswith(compaction)
    }
    assert {"bronze.cdc_raw", "silver.change_log", "gold.users"} <= compacted
    assert not any(line.startswith(compaction) for line in running.lines[cycle_2:])
    assert running.lines[-1].startswith("lakehouse run: done in ")

    gold = spark.read.format("delta").load(str(lake / "warehouse" / "gold.db" / "users"))
    assert sorted(tuple(r) for r in gold.select(*GOLD_COLUMNS).collect()) == EXPECTED_GOLD

    # One run summary per cycle; the second applied only the landed change.
    runs = [json.loads(p.read_text()) for p in sorted((lake / "_state" / "runs").glob("*.json"))]
    assert [r["status"] for r in runs] == ["succeeded", "succeeded"]
    assert [r["layers"]["gold"]["applied"] for r in runs] == [
        {"gold.users": 6},
        {"gold.users": 1},
    ]
    if "newest_event_ts" in TableApply.__dataclass_fields__:
        assert runs[1]["layers"]["gold"]["freshness"] == {"gold.users": "2023-11-14T22:13:29+00:00"}
        assert any(
            line.startswith("  gold    gold.users") and "fresh " in line for line in running.lines
        )
    else:
        # Before the gold apply reports its newest change, there is nothing to show.
        assert [r["layers"]["gold"]["freshness"] for r in runs] == [{}, {}]
