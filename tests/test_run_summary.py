"""The run summary's gold part: what it keeps of an apply, how freshness is printed, and
how many summaries a lake keeps."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pyspark_jobs.gold.apply import TableApply
from pyspark_jobs.pipeline import gold_totals
from pyspark_jobs.quality.report import IdleStretch, load_history, render_page
from pyspark_jobs.run_summary import (
    RunSummary,
    changed_nothing,
    format_summary,
    last_gold_freshness,
)


def test_gold_totals_keep_the_newest_event_time_of_the_tables_that_received_changes():
    tables = [
        TableApply(
            "gold.users", "shop", changes=3, rows=10, rejected=1,
            newest_event_ts=datetime(2024, 1, 1, 12, 0, 0, 250000, tzinfo=timezone.utc),
        ),
        # another zone: the same instant in UTC
        TableApply(
            "gold.orders", "erp", changes=1, rows=4,
            newest_event_ts=datetime(2024, 1, 1, 14, 0, tzinfo=timezone(timedelta(hours=2))),
        ),
        TableApply("gold.idle", "erp", rows=7, newest_event_ts=None),
        TableApply("gold.before", "old", changes=2, rows=2),  # nothing reported
    ]  # fmt: skip
    assert gold_totals(tables) == {
        "rows": {"gold.users": 10, "gold.orders": 4, "gold.idle": 7, "gold.before": 2},
        "applied": {"gold.users": 3, "gold.orders": 1, "gold.idle": 0, "gold.before": 2},
        "rejected": {"gold.users": 1, "gold.orders": 0, "gold.idle": 0, "gold.before": 0},
        "freshness": {
            "gold.users": "2024-01-01T12:00:00.250000+00:00",
            "gold.orders": "2024-01-01T12:00:00+00:00",
        },
    }


def test_a_table_without_new_changes_keeps_its_earlier_freshness():
    # An idle cycle's summary (and the report drawn from it) still shows how stale each
    # table is; before, it showed none (found on the warm-cycle bench's idle cycles).
    earlier = {
        "gold.idle": "2024-01-01T10:00:00+00:00",
        "gold.users": "2024-01-01T11:00:00+00:00",
        "gold.late": "2024-01-01T11:00:00+00:00",
        "gold.dropped": "2024-01-01T09:00:00+00:00",  # no longer configured
        "gold.bad": "not a time",
    }
    tables = [
        TableApply("gold.idle", "s"),
        TableApply(
            "gold.users", "s", changes=1,
            newest_event_ts=datetime(2024, 1, 1, 12, 0, tzinfo=timezone.utc),
        ),
        # a late change, older than what the table already had
        TableApply(
            "gold.late", "s", changes=1,
            newest_event_ts=datetime(2024, 1, 1, 8, 0, tzinfo=timezone.utc),
        ),
        TableApply("gold.bad", "s"),
        TableApply("gold.new", "s"),
    ]  # fmt: skip
    assert gold_totals(tables, earlier)["freshness"] == {
        "gold.idle": "2024-01-01T10:00:00+00:00",
        "gold.users": "2024-01-01T12:00:00+00:00",
        "gold.late": "2024-01-01T11:00:00+00:00",
    }


def test_the_last_gold_freshness_comes_from_the_newest_summary_with_a_gold_layer(
    tmp_path: Path,
):
    runs = tmp_path / "runs"
    runs.mkdir()
    assert last_gold_freshness(runs) == {}
    for run_id, layers in [
        ("20240101T000001Z", {"gold": {"freshness": {"gold.a": "2024-01-01T00:00:00+00:00"}}}),
        ("20240101T000002Z", {"gold": {"freshness": {"gold.a": "2024-01-02T00:00:00+00:00"}}}),
        ("20240101T000003Z", {"bronze": {}}),  # stopped by the bronze gate
    ]:
        summary = RunSummary(run_id=run_id)
        summary.layers = layers
        summary.save(runs)
    (runs / "20240101T000004Z.json").write_text("{ cut short")
    assert last_gold_freshness(runs) == {"gold.a": "2024-01-02T00:00:00+00:00"}


def test_a_naive_event_time_is_read_as_local_time_as_pyspark_returns_it():
    local = datetime(2024, 1, 1, 12, 0)
    totals = gold_totals([TableApply("gold.t", "s", newest_event_ts=local)])
    assert totals["freshness"] == {
        "gold.t": datetime.fromtimestamp(local.timestamp(), timezone.utc).isoformat()
    }


def test_the_printed_summary_shows_seconds_of_freshness_at_the_end_of_the_run():
    summary = RunSummary(run_id="r1", started_at=1704110390.0)
    summary.layers["gold"] = {
        "rows": {"gold.users": 10, "gold.idle": 7},
        "freshness": {"gold.users": "2024-01-01T12:00:00+00:00"},
    }
    summary.status = "succeeded"
    summary.finished_at = 1704110412.5  # 2024-01-01T12:00:12.5Z
    assert format_summary(summary).splitlines() == [
        "run r1: succeeded",
        "  gold    gold.idle                           7 rows",
        "  gold    gold.users                         10 rows  fresh 12.5 s",
    ]


def test_a_freshness_of_a_minute_or_more_is_also_printed_as_people_read_it():
    # The samples' changes are from 2023: seconds alone print as "fresh 95709105.0 s".
    summary = RunSummary(run_id="r2", started_at=1704110390.0)
    summary.layers["gold"] = {
        "rows": {"gold.a": 1, "gold.b": 1, "gold.c": 1},
        "freshness": {
            "gold.a": "2024-01-01T11:59:00+00:00",
            "gold.b": "2024-01-01T09:00:00+00:00",
            "gold.c": "2021-01-01T12:00:00+00:00",
        },
    }
    summary.finished_at = 1704110400.0  # 2024-01-01T12:00:00Z
    assert format_summary(summary).splitlines()[1:] == [
        "  gold    gold.a                              1 rows  fresh 60.0 s (1.0 min)",
        "  gold    gold.b                              1 rows  fresh 10800.0 s (3.0 h)",
        "  gold    gold.c                              1 rows  fresh 94608000.0 s (1095 d)",
    ]


def test_saving_with_keep_leaves_the_newest_summaries_the_report_reads(tmp_path: Path):
    runs = tmp_path / "runs"
    # run ids are UTC timestamps: written out of order, the newest still wins
    ids = [f"20261204T0000{second:02d}000000Z" for second in (3, 1, 4, 2)]
    for run_id in ids:
        RunSummary(run_id=run_id).save(runs)
    assert len(list(runs.glob("*.json"))) == 4  # no keep: nothing removed

    written = RunSummary(run_id="20261204T000005000000Z").save(runs, keep=3)
    assert written.is_file()
    assert sorted(p.name for p in runs.glob("*.json")) == [
        "20261204T000003000000Z.json",
        "20261204T000004000000Z.json",
        "20261204T000005000000Z.json",
    ]
    assert [r["run_id"] for r in load_history(runs).runs][0] == "20261204T000005000000Z"


def _summary(run_id: str, *, reused: bool = True, applied: int = 0, **fields) -> RunSummary:
    gate = {"success": True, "reused_from": "20261204T000000000000Z" if reused else ""}
    return RunSummary(
        run_id=run_id,
        status=fields.pop("status", "succeeded"),
        layers={"gold": {"applied": {"gold.a": applied}}},
        gates={layer: dict(gate) for layer in ("bronze", "silver", "gold")},
        **fields,
    )


def test_a_run_changed_nothing_only_when_every_gate_was_reused_and_nothing_applied():
    assert changed_nothing(asdict(_summary("r")))
    assert not changed_nothing(asdict(_summary("r", reused=False)))
    assert not changed_nothing(asdict(_summary("r", applied=1)))
    assert not changed_nothing(asdict(_summary("r", status="stopped by the gold gate")))
    assert not changed_nothing(asdict(_summary("r", command="validate")))
    # a run stopped before its last gate has no verdict for it
    partial = asdict(_summary("r"))
    del partial["gates"]["gold"]
    assert not changed_nothing(partial)


def _second(second: int) -> str:
    return f"20261204T0000{second:02d}000000Z"


def test_quiet_runs_are_counted_between_the_runs_the_trend_shows(tmp_path: Path):
    runs = tmp_path / "runs"
    # oldest first: 1 did something, 2-4 nothing, 5 something, 6 nothing, 7 nothing
    for second in range(1, 8):
        _summary(_second(second), reused=second not in (1, 5)).save(runs)
    assert sorted(p.name for p in runs.glob("*.idle.json")) == [
        f"{_second(s)}.idle.json" for s in (2, 3, 4, 6, 7)
    ]
    history = load_history(runs)
    # the newest run always, then only the runs that did something
    assert [r["run_id"] for r in history.runs] == [_second(s) for s in (7, 5, 1)]
    assert history.idle_after == {
        _second(5): IdleStretch(1, _second(6), _second(6)),
        _second(1): IdleStretch(3, _second(2), _second(4)),
    }
    page = render_page(history.runs, "docs/index.html", idle_after=history.idle_after)
    assert "Last 3 runs, and 4 between them that changed nothing" in page
    span = "2026-12-04 00:00:02 UTC to 2026-12-04 00:00:04 UTC"
    assert f"⋯ 3 runs that changed nothing ({span})" in page
    assert "⋯ 1 run that changed nothing (2026-12-04 00:00:06 UTC)" in page
    # the stretch sits above the run it followed (the table is newest first)
    assert page.index("⋯ 3 runs") < page.index(f"<td>{_second(1)}</td>")
    assert page.index(f"<td>{_second(5)}</td>") < page.index("⋯ 3 runs")
    # a limit counts the runs shown, not the quiet ones between them
    assert [r["run_id"] for r in load_history(runs, limit=2).runs] == [_second(7), _second(5)]


def test_pruning_keeps_the_newest_of_each_kind(tmp_path: Path):
    runs = tmp_path / "runs"
    for second in range(1, 9):
        _summary(_second(second), reused=second % 2 == 0).save(runs)
    # hours of quiet cycles do not push the last runs that did something out
    for second in range(10, 20):
        _summary(_second(second)).save(runs, keep=2)
    assert sorted(p.name for p in runs.glob("*.json")) == [
        f"{_second(5)}.json",
        f"{_second(7)}.json",
        f"{_second(18)}.idle.json",
        f"{_second(19)}.idle.json",
    ]
