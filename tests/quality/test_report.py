"""The report page from run summaries alone (no Spark): charts, every check with its value
and threshold, numbers that add up, the drill-down with samples, links to Data Docs."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from unittest.mock import patch

import pytest

from pyspark_jobs.quality import charts
from pyspark_jobs.quality.report import render_page, write_report


def check(column: str, threshold: str, values: dict, failing=(), details=None) -> dict:
    return {
        "expectation": f"expect_column_values_to_be_between({column})",
        "check": f"the {column} check",
        "column": column,
        "threshold": threshold,
        "success": not failing,
        "values": values,
        "failing": list(failing),
        "details": details or {},
        "observed": ", ".join(f"{n}={values[n]}" for n in failing),
    }


def gate(layer: str, index: str, rows: list[dict], checks: list[dict], page: str, **extra):
    return {
        "layer": layer,
        "success": all(c["success"] for c in checks),
        "seconds": 1.5,
        "timings": {"summary": 1.0, "validation": 0.2, "data_docs": 0.3},
        "failures": [
            f"{layer}.x: {c['column']} {c['threshold']}, observed {c['observed']}"
            for c in checks
            if not c["success"]
        ],
        "checkpoints": [
            {
                "name": f"{layer}.sources" if index == "source" else "gold.tables",
                "success": all(c["success"] for c in checks),
                "error": None,
                "asset": f"{layer} asset",
                "index": index,
                "rows": rows,
                "expectations": checks,
                "data_docs_page": page,
                "samples": extra.get("samples", {}),
            }
        ],
    }


def run(run_id: str, started: float, docs: Path, gold_fails: bool = False) -> dict:
    silver_row = {"source": "shop", "bronze_records": 7, "changes": 5, "redelivered": 0,
                  "rejected": 0, "noops": 1, "skipped": 1, "unaccounted": 0,
                  "reject_rate": 0.0}  # fmt: skip
    bronze_rows = [{"source": "shop", "read": 8, "quarantined": 1, "quarantine_rate": 0.125}]
    deleted = {"gold.users": 1 if gold_fails else 0}
    return {
        "run_id": run_id,
        "command": "run",
        "status": "stopped by the gold gate" if gold_fails else "succeeded",
        "started_at": started,
        "finished_at": started + 60,
        "timings": {"bronze": 10.0, "bronze gate": 2.0, "silver": 20.0, "gold": 25.0},
        "layers": {
            "bronze": {"records": {"shop": 7}, "quarantined": {"shop": 1}},
            "silver": {"changes": {"shop": 6}, "rejects": {"shop": 0}},
            "gold": {
                "rows": {"gold.users": 2},
                "applied": {"gold.users": 6},
                "rejected": {"gold.users": 0},
                "freshness": {"gold.users": "2024-01-01T00:00:00+00:00"},
            },
        },
        "gates": {
            "bronze": gate(
                "bronze",
                "source",
                bronze_rows,
                [check("quarantine_rate", "≤ 0.5", {"shop": 0.125})],
                str(docs / "validations" / "bronze" / run_id / "a b.html"),
                samples={"shop": [{"reason": "not JSON", "raw": "this is not a record"}]},
            ),
            "silver": gate(
                "silver",
                "source",
                [silver_row],
                [check("unaccounted", "= 0", {"shop": 0})],
                str(docs / "s.html"),
            ),
            "gold": gate(
                "gold",
                "table",
                [{"table": "gold.users", "rows": 2, "live_rows": 2, "entity_kind": "row"}],
                [
                    check(
                        "deleted_keys_live",
                        "= 0",
                        deleted,
                        failing=["gold.users"] if gold_fails else [],
                    )
                ],
                str(docs / "g.html"),
            ),
        },
    }


def test_the_page_shows_charts_checks_numbers_that_add_up_and_the_drill_down(tmp_path: Path):
    reports = tmp_path / "reports"
    docs = reports / "gx" / "uncommitted" / "data_docs" / "local_site"
    runs = tmp_path / "runs"
    runs.mkdir()
    for i, failing in enumerate((False, True)):
        summary = run(f"2024010{i}T000000Z", 1704067200.0 + i * 3600, docs, failing)
        (runs / f"{summary['run_id']}.json").write_text(json.dumps(summary))

    page = write_report(reports, runs, docs / "index.html").read_text()

    for chart in ("chart-run-time", "chart-sources", "chart-freshness"):
        assert re.search(rf'<figure id="{chart}"><svg', page), chart
    assert "<script" not in page and not re.search(r'(?:src|href)="(?:https?:)?//', page)
    # the failure, named with its value, in the callout and opened in the drill-down
    assert "gold: gold.x: deleted_keys_live = 0, observed gold.users=1" in page
    assert '<details id="table-gold.users" open>' in page
    # every check, passing ones too, with its value and threshold
    assert "0.125 for all 1 sources" in page
    assert re.search(r"quarantine_rate</td><td[^>]*>0\.125</td><td[^>]*>≤ 0\.5</td>", page)
    # bronze -> silver adds up; the quarantined sample and its reason
    drill = page[page.index('<details id="source-shop"') :]
    assert (
        "7 bronze records = 5 changes + 0 redelivered + 0 rejected + 1 noops + 1 skipped"
        " + 0 unaccounted; they hold 6 changes in the log" in drill
    )
    assert "not JSON" in drill and "this is not a record" in drill
    # links straight to each validation page, relative and quoted
    links = re.findall(r'<a class="docs-link" href="([^"]+)"', page)
    assert (
        links[0]
        == "gx/uncommitted/data_docs/local_site/validations/bronze/20240101T000000Z/a%20b.html"
    )
    assert len(links) == 3


def test_old_summaries_and_no_runs_still_render():
    assert "No runs yet" in render_page([], "docs/index.html")
    old = {
        "run_id": "r0",
        "status": "succeeded",
        "started_at": 1.0,
        "gates": {
            "bronze": {
                "success": True,
                "seconds": 3.0,
                "checkpoints": [
                    {
                        "name": "bronze.cdc_raw",
                        "success": True,
                        "expectations": [
                            {"expectation": "expect_x(source)", "success": True, "observed": ""}
                        ],
                    }
                ],
            }
        },
    }
    page = render_page([old], "docs/index.html")
    assert "expect_x(source)" in page and 'id="gate-silver"' in page


def test_a_quiet_cycle_leaves_the_trend_charts_as_drawn_and_redraws_freshness(tmp_path: Path):
    reports = tmp_path / "reports"
    docs = reports / "gx" / "index.html"
    runs = tmp_path / "runs"
    runs.mkdir()
    for i in range(3):
        summary = run(f"2024010{i}T000000000000Z", 1704067200.0 + i * 3600, tmp_path)
        (runs / f"{summary['run_id']}.json").write_text(json.dumps(summary))
    before = write_report(reports, runs, docs).read_text()
    drawn = {name: draw.cache_info().misses for name, draw in TREND_DRAWINGS.items()}
    freshness = charts.freshness_chart

    # a run that changed nothing: every gate reused, nothing applied, a new run time
    quiet = run("20240105T000000000000Z", 1704067200.0 + 5 * 3600, tmp_path)
    for gate_result in quiet["gates"].values():
        gate_result["reused_from"] = "20240102T000000000000Z"
    quiet["layers"]["gold"]["applied"] = {"gold.users": 0}
    quiet["timings"] = {"bronze": 0.5, "silver": 0.1, "gold": 0.2}
    (runs / "20240105T000000000000Z.idle.json").write_text(json.dumps(quiet))
    redrawn = []
    with patch.object(charts, "freshness_chart", lambda f: redrawn.append(f) or freshness(f)):
        after = write_report(reports, runs, docs).read_text()

    # the trend charts show the same runs, drawn once; the freshness is the new run's
    assert {name: draw.cache_info().misses for name, draw in TREND_DRAWINGS.items()} == drawn
    for chart in ("chart-run-time", "chart-sources"):
        assert _figure(after, chart) == _figure(before, chart)
    assert redrawn == [{"gold.users": pytest.approx(freshness_seconds_at(quiet))}]
    assert "Last 4 runs" in after and "latest: run 20240105T000000000000Z" in after


TREND_DRAWINGS = {
    "run time": charts._draw_run_time,
    "sources": charts._draw_source_trend,
}


def _figure(page: str, chart: str) -> str:
    start = page.index(f'<figure id="{chart}">')
    return page[start : page.index("</figure>", start)]


def freshness_seconds_at(summary: dict) -> float:
    newest = datetime.fromisoformat(summary["layers"]["gold"]["freshness"]["gold.users"])
    return summary["finished_at"] - newest.timestamp()
