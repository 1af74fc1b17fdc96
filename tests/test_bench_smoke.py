"""`make bench` at a tiny size: every figure is there and the peers' tables equal ours.

Correctness only: no timing is asserted (the targets of issue 12 are measured by
`make bench`, on a quiet machine). The whole-harness run starts a dozen JVMs, so it is
marked ``bench`` and run by `make bench-check`, not by `make test`; the workload and
comparison tests here stay in `make test`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from benchmarks.compare import differences
from benchmarks.generate import CASSANDRA, DEBEZIUM, SOURCES, TIGERGRAPH, Workload
from benchmarks.rss import tree_rss_bytes
from benchmarks.warm_cycles import WIDE, WideWorkload, spread
from pyspark_jobs.settings import PROJECT_ROOT

GOLD_TABLES = {"gold.users", "gold.customers", "gold.tg_person", "gold.tg_company",
               "gold.tg_works_at"}  # fmt: skip
REFUSAL = (
    "[AUTOCDC_TARGET_DOES_NOT_SUPPORT_MERGE] Cannot start AutoCDC flow: the target table "
    "`spark_catalog`.`default`.`users` (format: delta) does not support row-level operations. "
    "AutoCDC requires a target backed by a connector that supports MERGE. SQLSTATE: 0A000"
)


def _landed(folder: Path) -> dict[str, list[str]]:
    return {s: sorted(p.read_text() for p in (folder / s).glob("*.jsonl")) for s in SOURCES}


def test_the_workload_is_seeded_and_has_disorder_and_redeliveries(tmp_path: Path):
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        Workload(50, seed=seed, out_of_order=0.1, redelivered=0.1).write(tmp_path / name, 1500)
    assert _landed(tmp_path / "a") == _landed(tmp_path / "b")
    assert _landed(tmp_path / "a") != _landed(tmp_path / "c")

    records = {
        s: [json.loads(line) for text in texts for line in text.splitlines()]
        for s, texts in _landed(tmp_path / "a").items()
    }
    # the shares of 1500 changes, plus deletes' tombstones and redeliveries
    assert {s: len(r) for s, r in records.items()} == {DEBEZIUM: 814, CASSANDRA: 498,
                                                      TIGERGRAPH: 329}  # fmt: skip
    for source, landed in records.items():
        assert [r["offset"] for r in landed] == list(range(len(landed)))
        values = Counter(json.dumps(r["value"]) for r in landed if r["value"] is not None)
        assert any(n > 1 for n in values.values()), f"{source}: nothing redelivered"
    positions = {
        DEBEZIUM: [r["value"]["source"]["lsn"] for r in records[DEBEZIUM] if r["value"]],
        CASSANDRA: [r["value"]["source"]["pos"] for r in records[CASSANDRA] if r["value"]],
        TIGERGRAPH: [int(r["value"]["mid"].split("|")[2]) for r in records[TIGERGRAPH]],
    }
    for source, seen in positions.items():
        assert any(b < a for a, b in zip(seen, seen[1:], strict=False)), source
    ops = {
        DEBEZIUM: Counter(r["value"]["op"] if r["value"] else None for r in records[DEBEZIUM]),
        TIGERGRAPH: Counter(
            (r["value"]["type"], r["value"]["operator"]) for r in records[TIGERGRAPH]
        ),
    }
    assert set(ops[DEBEZIUM]) == {"c", "u", "d", None}
    assert set(ops[TIGERGRAPH]) == {("vertex", "insert"), ("vertex", "delete"),
                                    ("vertex", "insert-only"), ("edge", "insert"),
                                    ("edge", "delete")}  # fmt: skip
    cells = [c for r in records[CASSANDRA] if r["value"] for c in r["value"]["after"].values()]
    assert any(c["deletion_ts"] is not None for c in cells)
    assert Counter(r["value"]["op"] for r in records[CASSANDRA] if r["value"]).keys() == {
        "i", "u", "d"
    }  # fmt: skip


def test_the_warm_cycle_batches_touch_each_key_once(tmp_path: Path):
    assert spread(["a", "b", "c"], 10) == {"a": 4, "b": 3, "c": 3}
    workload = WideWorkload(3)
    workload.write(tmp_path, dict.fromkeys(workload.tables, 10), now_ms=1)
    workload.write(tmp_path, {"t01": 10, "t03": 5}, now_ms=2)
    files = sorted((tmp_path / WIDE).glob("*.jsonl"))
    assert [p.name for p in files] == ["part-000001.jsonl", "part-000002.jsonl"]
    base, batch = ([json.loads(line) for line in p.read_text().splitlines()] for p in files)
    assert Counter(r["value"]["op"] for r in base) == {"c": 30}
    ops = Counter((r["topic"], r["value"]["op"]) for r in batch)
    # a fifth new keys, the rest updates of existing ones
    assert ops == {("shop.public.t01", "u"): 8, ("shop.public.t01", "c"): 2,
                   ("shop.public.t03", "u"): 4, ("shop.public.t03", "c"): 1}  # fmt: skip
    keys = [(r["topic"], r["key"]["ID"]) for r in batch]
    assert len(keys) == len(set(keys))
    assert workload.keys == {"t01": 12, "t02": 10, "t03": 11}
    for topic in ("shop.public.t01", "shop.public.t03"):
        offsets = [r["offset"] for r in base + batch if r["topic"] == topic]
        assert offsets == list(range(len(offsets)))
    positions = [r["value"]["source"]["lsn"] for r in base + batch]
    assert positions == sorted(set(positions))
    with pytest.raises(ValueError, match="t02: 16 updates, 10 keys"):
        workload.write(tmp_path, {"t02": 20}, now_ms=3)


def test_the_rss_sampler_outlives_a_process_that_ends_while_it_looks(monkeypatch):
    # A short-lived child (dbt's, a JVM's) can end between the listing of /proc/<pid>
    # and the scan of its tasks: glob then raises, and the sampler thread died of it.
    def vanished(self: Path, pattern: str) -> list[Path]:
        raise FileNotFoundError(f"{self} is gone")

    assert tree_rss_bytes(os.getpid()) > 0
    monkeypatch.setattr(Path, "glob", vanished)
    assert tree_rss_bytes(os.getpid()) > 0  # the root itself, without its children


def test_the_rss_sampler_counts_a_child_sharing_its_parents_memory_once():
    # The JVM's posix_spawn children share its address space until they exec, and /proc
    # shows each with the JVM's whole RSS. A forked child that never execs is the same
    # case (its pages are its parent's until written): the tree is counted once.
    held = 256 * 2**20
    code = (
        f"import os, sys, time; b = bytearray({held}); b[::4096] = b'x' * len(b[::4096]);"
        "pid = os.fork(); print('ready', flush=True) if pid else None; time.sleep(60)"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True
    ) as process:
        try:
            assert process.stdout is not None and process.stdout.readline() == b"ready\n"
            rss = tree_rss_bytes(process.pid)
            assert held <= rss < 1.5 * held
            # a child that runs a program of its own (this test's child) is counted
            assert tree_rss_bytes(os.getpid()) > rss
        finally:
            os.killpg(process.pid, signal.SIGKILL)


def test_differences_counts_rows_only_on_one_side(spark: SparkSession):
    ours = spark.createDataFrame([(1, "a"), (2, "b"), (2, "b")], "id int, v string")
    theirs = spark.createDataFrame([(1, "a"), (2, "c"), (3, "d")], "id int, v string")
    assert differences(ours, ours, ["id", "v"]) == {"missing": 0, "extra": 0}
    assert differences(ours, theirs, ["id", "v"]) == {"missing": 2, "extra": 2}
    assert differences(ours, theirs, ["id"]) == {"missing": 1, "extra": 1}


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


@pytest.mark.bench
@pytest.mark.timeout(3600)
def test_the_bench_at_a_tiny_size_fills_every_figure(tmp_path: Path):
    out = tmp_path / "results"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "LAKEHOUSE_SHUFFLE_PARTITIONS": "2"}
    command = [sys.executable, "-m", "benchmarks.run", "--events", "600", "--keys", "50",
               "--growth-keys", "100", "--rate", "40", "--duration", "3",
               "--work", str(tmp_path / "work"), "--out", str(out)]  # fmt: skip
    bench = subprocess.run(command, capture_output=True, text=True, env=env, cwd=PROJECT_ROOT)
    assert bench.returncode == 0, bench.stdout[-4000:] + bench.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    assert results["problems"] == []

    workload = results["workload"]
    assert workload["records"] == {DEBEZIUM: 308, CASSANDRA: 184, TIGERGRAPH: 123}
    assert workload["total_records"] == 615
    floor = results["copy_floor"]
    assert floor["rows"] == workload["total_records"]
    assert all(_positive(floor[k]) for k in ("seconds", "session_seconds", "peak_rss_bytes"))

    ours = results["ours"]
    assert (ours["succeeded"], ours["status"]) == (True, "succeeded")
    assert set(ours["gold_rows"]) == GOLD_TABLES
    assert all(_positive(n) for n in ours["gold_rows"].values())
    assert set(ours["layers"]) == {"bronze", "silver", "gold", "gates"}
    for layer, figures in ours["layers"].items():
        assert _positive(figures["seconds"]) and _positive(figures["peak_rss_bytes"]), layer

    debezium = results["debezium"]
    assert debezium["records"] == workload["records"][DEBEZIUM]
    assert debezium["ours"]["succeeded"] and set(debezium["ours"]["gold_rows"]) == {"gold.users"}
    assert debezium["peer"]["differences"] == {"missing": 0, "extra": 0}
    assert _positive(debezium["peer"]["seconds"])
    # When a new pin lets AUTO CDC run on Delta, this fails: compare it then, and update
    # the README's bench section.
    auto = debezium["auto_cdc"]
    assert (auto["status"], auto["error_class"], auto["message"]) == (
        "refused",
        "AUTOCDC_TARGET_DOES_NOT_SUPPORT_MERGE",
        REFUSAL,
    )

    growth = results["cost_growth"]
    assert [(growth[k]["keys"], growth[k]["touched_keys"]) for k in ("B", "4B")] == [
        (100, 1),
        (400, 4),
    ]
    for label in ("B", "4B"):
        assert growth[label]["base"]["succeeded"] and growth[label]["batch"]["succeeded"]
        assert _positive(growth[label]["batch"]["seconds"])
        assert 0 < growth[label]["batch_records"] < growth[label]["base_records"]

    fresh = results["freshness"]
    assert fresh["events"] > 0 and fresh["cycles"] >= 1 and fresh["failed_cycles"] == 0
    assert fresh["visible_rows"] > 0
    assert 0 < fresh["p50_seconds"] <= fresh["p95_seconds"] <= fresh["max_seconds"]

    warm = results["warm_cycles"]
    assert warm["tables"] == 24 and _positive(warm["cold_cycle_seconds"])
    for kind, changes, tables in (("one_table", 100, 1), ("spread", 1000, 24)):
        batch = warm[kind]
        assert (batch["changes"], batch["tables"], len(batch["cycles"])) == (changes, tables, 2)
        for cycle in batch["cycles"]:
            assert _positive(cycle["seconds"])
            assert set(cycle["stages"]) == {"bronze", "silver", "gold", "gates"}
            assert 0 < sum(cycle["stages"].values()) <= cycle["seconds"]

    table = (out / "results.md").read_text()
    headings = (
        "| end to end, all sources |",
        "| Debezium part (308 records) |",
        "| cost growth: a 1 % batch |",
        "| freshness, `run --every 0` at 40 events/s",
        "| warm cycle, `run --every 3`, 24 tables |",
    )
    for heading in headings:
        assert heading in table
    assert f"`` {REFUSAL} ``" in table
    assert (out / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
