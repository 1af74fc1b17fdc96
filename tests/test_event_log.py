"""``benchmarks.event_log``: a run's Spark jobs per pipeline step, from Spark's event log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.event_log import (
    DELTA_UNNAMED,
    UNNAMED,
    CompressedEventLog,
    log_files,
    read_events,
    scan_reads,
    scans_table,
    step_costs,
    step_of,
)


@pytest.mark.parametrize(
    ("description", "step"),
    [
        # As a warm cycle's event log has them (Spark 4.2, Delta 4.4).
        ("gold gate: summary", "gold gate: summary"),
        (
            "Delta: Delta: gold: state tables and progress: Filtering files for query: "
            "Compute snapshot for version: 2",
            "gold: state tables and progress",
        ),
        (
            "gold: merge gold.t01 - MERGE operation - scanning files for matches",
            "gold: merge gold.*",
        ),
        (
            "Delta: gold: merge gold.t02: Writing modified data - MERGE operation - "
            "Rewriting 1 files",
            "gold: merge gold.*",
        ),
        ("gold: insert into gold.users", "gold: insert into gold.*"),
        ("Delta: Compute snapshot for version: 3", DELTA_UNNAMED),
        ("Delta: Filtering files for query", DELTA_UNNAMED),
        ("bronze_bench_wide\nid = 2a52\nrunId = fed8\nbatch = 4", "bronze_bench_wide"),
        (None, UNNAMED),
        ("", UNNAMED),
    ],
)
def test_a_jobs_step_is_its_description_without_deltas_additions(description, step):
    assert step_of(description) == step


def _job(job_id: int, start: float, end: float, description: str | None) -> list[dict]:
    properties = {} if description is None else {"spark.job.description": description}
    return [
        {
            "Event": "SparkListenerJobStart",
            "Job ID": job_id,
            "Submission Time": int(start * 1000),
            "Properties": properties,
        },
        {"Event": "SparkListenerJobEnd", "Job ID": job_id, "Completion Time": int(end * 1000)},
    ]


def test_each_step_sums_its_jobs_and_the_seconds_in_which_one_of_them_ran():
    events = [
        # Two MERGEs side by side (different tables, one step), overlapping for 1 s.
        *_job(1, 100.0, 102.0, "gold: merge gold.a - MERGE operation - materialize source"),
        *_job(2, 101.0, 103.0, "Delta: gold: merge gold.b: Writing modified data"),
        *_job(3, 104.0, 104.5, "gold gate: summary"),
        # Before and after the window: not counted.
        *_job(4, 90.0, 91.0, "gold gate: summary"),
        *_job(5, 110.0, 111.0, "gold gate: summary"),
        # Started in the window, ended after it: clipped.
        *_job(6, 105.6, 108.0, None),
    ]
    cost = step_costs(events, start=99.0, end=106.0)
    steps = {s.step: s for s in cost.steps}
    assert set(steps) == {"gold: merge gold.*", "gold gate: summary", UNNAMED}
    merge = steps["gold: merge gold.*"]
    assert (merge.jobs, merge.job_seconds, merge.busy_seconds) == (2, 4.0, 3.0)
    gate = steps["gold gate: summary"]
    assert (gate.jobs, gate.job_seconds, gate.busy_seconds) == (1, 0.5, 0.5)
    assert steps[UNNAMED].busy_seconds == pytest.approx(0.4)
    # Sorted by the seconds each step kept Spark busy.
    assert [s.step for s in cost.steps] == ["gold: merge gold.*", "gold gate: summary", UNNAMED]
    assert cost.seconds == 7.0
    assert cost.busy_seconds == pytest.approx(3.9)
    assert cost.driver_only_seconds == pytest.approx(3.1)


def test_the_whole_log_when_no_window_is_given():
    events = [*_job(1, 10.0, 11.0, "a"), *_job(2, 12.0, 14.0, "b")]
    cost = step_costs(events)
    assert (cost.seconds, cost.busy_seconds) == (4.0, 3.0)
    assert step_costs([]).seconds == 0.0


def _write(path: Path, events: list[dict], partial: str = "") -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in events) + partial)


def test_a_rolling_log_is_read_part_by_part_in_order_and_a_line_being_written_is_left(
    tmp_path: Path,
):
    older = tmp_path / "eventlog_v2_local-1"
    older.mkdir()
    _write(older / "events_1_local-1", _job(1, 1.0, 2.0, "old"))
    newer = tmp_path / "eventlog_v2_local-2"
    newer.mkdir()
    # Part 10 sorts after part 2 by number, not by name.
    _write(newer / "events_10_local-2", _job(3, 5.0, 6.0, "third"))
    _write(newer / "events_2_local-2", _job(2, 3.0, 4.0, "second"), partial='{"Event": "Spa')
    (newer / "appstatus_local-2.inprogress").write_text("")
    os.utime(older, (0, 0))
    assert [p.name for p in log_files(tmp_path)] == ["events_2_local-2", "events_10_local-2"]
    assert [s.step for s in step_costs(read_events(tmp_path)).steps] == ["second", "third"]


def test_a_compressed_log_is_refused_with_the_setting_that_avoids_it(tmp_path: Path):
    log = tmp_path / "eventlog_v2_local-3"
    log.mkdir()
    (log / "events_1_local-3.zstd").write_bytes(b"\x28\xb5\x2f\xfd")
    with pytest.raises(CompressedEventLog, match="spark.eventLog.compress=false"):
        list(read_events(tmp_path))


def test_jobs_started_by_threads_of_a_named_step_carry_its_name(tmp_path: Path):
    """A real Spark event log: the snapshot loads a step runs on a thread pool
    (``snapshots.load_snapshots``) carry the step's name; before they did not, and a
    24-table warm cycle's gold gate had 74 jobs under no step. And a named step's read of
    a table shows in its scans with every file the table holds."""
    events_dir = tmp_path / "events"
    events_dir.mkdir()
    script = (
        "from pyspark_jobs.job_names import named_jobs\n"
        "from pyspark_jobs.session import get_spark\n"
        "from pyspark_jobs.settings import Settings\n"
        "from pyspark_jobs.snapshots import load_snapshots\n"
        "settings = Settings.from_env().with_conf([\n"
        "    ('spark.eventLog.enabled', 'true'),\n"
        f"    ('spark.eventLog.dir', {str(events_dir)!r}),\n"
        "    ('spark.eventLog.compress', 'false'),\n"
        "])\n"
        "spark = get_spark(settings)\n"
        "for name in ('a', 'b'):\n"
        "    spark.range(3).write.format('delta').saveAsTable(name)\n"
        "    spark.range(3, 5).write.format('delta').mode('append').saveAsTable(name)\n"
        "with named_jobs(spark, 'probe: load snapshots'):\n"
        "    load_snapshots(spark, ['a', 'b'])\n"
        "files = spark.sql('describe detail a').first()['numFiles']\n"
        "with named_jobs(spark, 'probe: read a'):\n"
        "    spark.table('a').collect()\n"
        "print('FILES', files)\n"
        "spark.stop()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "LAKEHOUSE_ROOT": str(tmp_path / "lake")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    steps = {s.step: s for s in step_costs(read_events(events_dir)).steps}
    # ``describe detail`` of each table: at least a job each, all named.
    assert steps["probe: load snapshots"].jobs >= 2, steps
    (files,) = [int(s.split()[1]) for s in out.stdout.splitlines() if s.startswith("FILES ")]
    reads = {(r.step, r.table): r for r in scan_reads(read_events(events_dir))}
    read_a = reads["probe: read a", "default.a"]
    assert (read_a.scans, read_a.files) == (1, files), reads
    assert read_a.bytes > 0


def _scan(node_id: int, table: str) -> dict:
    """A file scan's plan node, its two driver metrics numbered from ``node_id``."""
    return {
        "nodeName": f"Scan parquet spark_catalog.{table}",
        "metrics": [
            {"name": "number of output rows", "accumulatorId": node_id * 10},
            {"name": "number of files read", "accumulatorId": node_id * 10 + 1},
            {"name": "size of files read", "accumulatorId": node_id * 10 + 2},
        ],
        "children": [],
    }


def _query(execution: int, at: float, description: str, *scans: dict) -> dict:
    plan = {"nodeName": "AdaptiveSparkPlan", "metrics": [], "children": list(scans)}
    return {
        "Event": "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart",
        "executionId": execution,
        "description": description,
        "time": int(at * 1000),
        "sparkPlanInfo": plan,
    }


def _driver_metrics(execution: int, *updates: tuple[int, int]) -> dict:
    return {
        "Event": "org.apache.spark.sql.execution.ui.SparkListenerDriverAccumUpdates",
        "executionId": execution,
        "accumUpdates": [list(u) for u in updates],
    }


def test_scans_sum_the_files_and_bytes_each_step_read_of_each_table():
    events = [
        # A join reading the change log twice (two scans), and one gold table.
        _query(
            1,
            100.0,
            "gold: fold inputs of the graph family",
            _scan(1, "silver.change_log"),
            _scan(2, "silver.change_log"),
            _scan(3, "gold.tg_person"),
        ),
        _driver_metrics(1, (11, 4), (12, 4000), (21, 4), (22, 4000), (31, 1), (32, 500)),
        # Adaptive execution re-plans the query with the same scan: not counted again.
        {
            "Event": "org.apache.spark.sql.execution.ui.SparkListenerSQLAdaptiveExecutionUpdate",
            "executionId": 1,
            "sparkPlanInfo": _scan(1, "silver.change_log"),
        },
        # Delta's description of its own work names the step it works for.
        _query(2, 101.0, "Delta: silver gate: summary: Filtering files for query"),
        _query(3, 101.5, "silver gate: summary", _scan(4, "silver.change_log")),
        _driver_metrics(3, (41, 8), (42, 2**20)),
        # Before the window: not counted.
        _query(4, 90.0, "silver gate: summary", _scan(5, "silver.change_log")),
        _driver_metrics(4, (51, 8), (52, 2**20)),
        # Not a table's scan (a checkpointed relation): left out.
        _query(5, 102.0, "gold gate: summary", {"nodeName": "Scan ExistingRDD", "metrics": []}),
    ]
    reads = {(r.step, r.table): r for r in scan_reads(events, start=99.0)}
    assert set(reads) == {
        ("gold: fold inputs of the graph family", "silver.change_log"),
        ("gold: fold inputs of the graph family", "gold.tg_person"),
        ("silver gate: summary", "silver.change_log"),
    }
    graph = reads["gold: fold inputs of the graph family", "silver.change_log"]
    assert (graph.scans, graph.files, graph.bytes) == (2, 8, 8000)
    person = reads["gold: fold inputs of the graph family", "gold.tg_person"]
    assert (person.scans, person.files, person.bytes) == (1, 1, 500)
    gate = reads["silver gate: summary", "silver.change_log"]
    assert (gate.scans, gate.files, gate.bytes) == (1, 8, 2**20)
    assert scans_table([gate])[-1] == "| silver.change_log | silver gate: summary | 1 | 8 | 1.00 |"
