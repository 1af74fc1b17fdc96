"""The data-quality report: GX Data Docs plus one self-contained run summary page.

``<lake>/reports/index.html`` is written from the run summaries (``<lake>/_state/runs``)
alone, without Spark: the latest run's status and failures; charts of run time per layer,
changes and rejects per source over the last runs and freshness per gold table (inline
SVG, drawn by matplotlib); every check of every gate with its observed value per source or
table and its threshold; bronze -> silver counts that add up per source; a drill-down per
source and per gold table (last run's counts, its checks, a few quarantined lines,
rejects or cast failures with their reasons); links straight to each validation's Data
Docs page; and the last runs as a trend table. The trend and its charts keep to the runs
that changed something (the newest run is always shown): a continuous run's quiet
cycles, saved as ``*.idle.json`` (``run_summary.changed_nothing``), are counted between
them, one line per stretch, not listed. Plain HTML, inline CSS and SVG, no script:
it opens from disk, from a CI artifact or behind ``lakehouse report --serve`` alike, with
no network.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import Any

from pyspark_jobs.durations import freshness_seconds, human_seconds
from pyspark_jobs.quality import charts
from pyspark_jobs.quality.definitions import LAYERS
from pyspark_jobs.quality.gate_steps import is_gate_step
from pyspark_jobs.run_summary import changed_nothing, is_idle, run_id_of

TREND_RUNS = 20
# bronze -> silver: where each bronze record of a source went (the silver gate's rule)
ACCOUNTING = ("changes", "redelivered", "rejected", "noops", "skipped", "unaccounted")

CSS = """
:root { --ok:#1a7f37; --bad:#cf222e; --muted:#57606a; --line:#d0d7de; --bg:#f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color:#1f2328;
       margin:0; background:#fff; }
header { padding:18px 28px; border-bottom:1px solid var(--line); background:var(--bg);
         display:flex; align-items:center; gap:16px; flex-wrap:wrap; }
header h1 { font-size:20px; margin:0; }
main { padding:8px 28px 40px; max-width:1280px; }
h2 { font-size:16px; margin:26px 0 10px; border-bottom:1px solid var(--line); padding-bottom:4px; }
h3 { font-size:14px; margin:14px 0 6px; }
.badge { display:inline-block; padding:2px 10px; border-radius:12px; font-weight:600;
         color:#fff; font-size:12px; letter-spacing:.02em; }
.ok { background:var(--ok); } .bad { background:var(--bad); } .skip { background:#8c959f; }
.meta { color:var(--muted); }
.charts { display:grid; grid-template-columns:repeat(auto-fit, minmax(560px, 1fr)); gap:14px; }
figure { margin:0; border:1px solid var(--line); border-radius:8px; padding:8px; }
figure svg { width:100%; height:auto; }
.gates { display:grid; grid-template-columns:1fr; gap:14px; }
.gate table { table-layout:fixed; } .gate td { overflow-wrap:anywhere; }
.gate th:nth-child(1) { width:28px; } .gate th:nth-child(4) { width:120px; }
.gate { border:1px solid var(--line); border-radius:8px; padding:12px 14px; }
.gate.failed { border-color:var(--bad); box-shadow:0 0 0 1px var(--bad) inset; }
.gate h3 { margin:0 0 6px; font-size:15px; display:flex; justify-content:space-between; }
table { border-collapse:collapse; width:100%; margin:4px 0 8px; }
th, td { border-bottom:1px solid var(--line); padding:4px 8px; text-align:left;
         vertical-align:top; }
th { background:var(--bg); font-weight:600; font-size:12px; color:var(--muted); }
td.n { text-align:right; font-variant-numeric: tabular-nums; white-space:nowrap; }
td.mono, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size:12px;
                 overflow-wrap:anywhere; }
tr.failed td, td.failed { background:#fff5f5; color:var(--bad); font-weight:600; }
.mark-ok { color:var(--ok); } .mark-bad { color:var(--bad); font-weight:700; }
a { color:#0969da; }
.callout { border-left:4px solid var(--bad); background:#fff5f5; padding:10px 14px; margin:16px 0; }
.callout ul { margin:6px 0 0; }
details { border:1px solid var(--line); border-radius:8px; padding:6px 12px; margin:6px 0; }
details[open] { padding-bottom:10px; }
summary { cursor:pointer; font-weight:600; }
summary .meta { font-weight:400; }
.sum { font-weight:600; border-top:2px solid var(--line); }
.reused { border-left:4px solid #8c959f; background:var(--bg); padding:6px 10px; margin:6px 0; }
tr.idle td { color:var(--muted); background:var(--bg); font-style:italic; }
"""


@dataclass
class RunHistory:
    """What the report shows of the run summaries: the newest run, then the newest runs that
    changed something (newest first), and how many runs that changed nothing came after
    each of those (by run id; only stretches of at least one)."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    idle_after: dict[str, IdleStretch] = field(default_factory=dict)


@dataclass
class IdleStretch:
    """Consecutive runs that changed nothing: how many, the first and the last run id."""

    runs: int
    first: str
    last: str


def load_history(runs_dir: Path, limit: int = TREND_RUNS) -> RunHistory:
    """The newest summary and the newest ``limit`` of runs that changed something, read
    from ``runs_dir``; the runs that changed nothing between them are only counted, by
    their file names (unreadable files are skipped)."""
    history = RunHistory()
    newest_first = sorted(runs_dir.glob("*.json"), reverse=True)
    quiet: list[str] = []  # idle run ids newer than the next run to be shown, newest first
    for index, path in enumerate(newest_first):
        if len(history.runs) >= limit:
            break
        if index > 0 and is_idle(path):
            quiet.append(run_id_of(path))
            continue
        try:
            run = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if quiet:
            stretch = IdleStretch(len(quiet), first=quiet[-1], last=quiet[0])
            history.idle_after[str(run.get("run_id"))] = stretch
            quiet = []
        history.runs.append(run)
    return history


def _when(ts: float | None) -> str:
    if not ts:
        return ""
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _badge(success: bool | None, yes: str = "passed", no: str = "FAILED") -> str:
    if success is None:
        return '<span class="badge skip">not run</span>'
    return f'<span class="badge {"ok" if success else "bad"}">{yes if success else no}</span>'


def _mark(success: bool) -> str:
    return '<span class="mark-ok">✓</span>' if success else '<span class="mark-bad">✗</span>'


def _num(value: Any) -> str:
    return f'<td class="n">{escape(_show(value))}</td>'


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return "–" if value is None else str(value)


def _duration(run: dict[str, Any]) -> str:
    if run.get("finished_at") and run.get("started_at"):
        return f"{run['finished_at'] - run['started_at']:.1f} s"
    return ""


def _checkpoint(run: dict[str, Any], layer: str) -> dict[str, Any] | None:
    gate = run.get("gates", {}).get(layer)
    if not gate or not gate.get("checkpoints"):
        return None
    checkpoint: dict[str, Any] = gate["checkpoints"][0]
    return checkpoint


def _rows_by(checkpoint: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The gate's summary rows by source or table."""
    if not checkpoint or not checkpoint.get("index"):
        return {}
    index = checkpoint["index"]
    return {str(r.get(index)): r for r in checkpoint.get("rows", [])}


def table_freshness(run: dict[str, Any]) -> dict[str, float]:
    """Seconds from each gold table's newest applied change to the end of ``run``."""
    end = run.get("finished_at") or run.get("started_at") or 0.0
    out = {}
    for table, newest in run.get("layers", {}).get("gold", {}).get("freshness", {}).items():
        try:
            out[table] = freshness_seconds(newest, end)
        except (TypeError, ValueError):
            continue
    return out


# --- the sections ---------------------------------------------------------------------


def _charts(runs: list[dict[str, Any]]) -> str:
    if not charts.available():
        return (
            '<p class="meta">Charts need matplotlib (<code>pip install matplotlib</code>); '
            "every number is in the tables below.</p>"
        )
    # The trends leave out the newest run when it changed nothing, as they leave out every
    # other such run (load_history).
    oldest_first = list(reversed(runs[1:] if changed_nothing(runs[0]) else runs))
    drawn = [
        ("chart-run-time", charts.run_time_chart(oldest_first)),
        ("chart-sources", charts.source_trend_chart(oldest_first)),
        ("chart-freshness", charts.freshness_chart(table_freshness(runs[0]))),
    ]
    figures = "".join(
        f'<figure id="{name}">{svg}</figure>' for name, svg in drawn if svg is not None
    )
    return f'<div class="charts">{figures}</div>' if figures else ""


def _observed_summary(check: dict[str, Any], noun: str) -> str:
    values = check.get("values", {})
    if not values:
        return "no rows"
    distinct = {json.dumps(v, sort_keys=True) for v in values.values()}
    if len(distinct) == 1:
        value = next(iter(values.values()))
        return f"{'null' if value is None else _show(value)} for all {len(values)} {noun}"
    numbers = [v for v in values.values() if isinstance(v, (int, float))]
    if len(numbers) == len(values):
        return f"max {_show(max(numbers))} over {len(values)} {noun}"
    return f"{len(distinct)} different values over {len(values)} {noun}"


def _gate_card(layer: str, gate: dict[str, Any] | None, link: Callable[[str], str]) -> str:
    if gate is None:
        return (
            f'<div class="gate" id="gate-{layer}"><h3><span>{layer}</span>{_badge(None)}</h3>'
            '<p class="meta">Not validated in this run (an earlier step stopped it).</p></div>'
        )
    timings = gate.get("timings", {})
    spent = " · ".join(f"{k} {v:.1f} s" for k, v in timings.items())
    reused = gate.get("reused_from")
    yes = "passed (not validated again)" if reused else "passed"
    parts = [
        f'<div class="gate{"" if gate.get("success") else " failed"}" id="gate-{layer}">',
        f"<h3><span>{layer}</span>{_badge(gate.get('success'), yes)}</h3>",
        f'<div class="meta">{gate.get("seconds", 0):.1f} s'
        + (f" ({escape(spent)})" if spent else "")
        + "</div>",
    ]
    if reused:
        parts.append(
            f'<p class="reused">Not validated again in this run: nothing this gate checks '
            f"changed since run <strong>{escape(reused)}</strong>, where it passed. The checks "
            "and values below, and the Data Docs page, are that run's validation.</p>"
        )
    elif gate.get("rows_from"):
        recounted = gate.get("recounted", [])
        unit = "table" if layer == "gold" else "source"
        parts.append(
            f'<p class="reused">Validated in this run. Only {len(recounted)} {unit}(s) changed '
            f"since run <strong>{escape(gate['rows_from'])}</strong>, where this gate passed "
            f"({escape(', '.join(recounted)) or 'none'}): their rows were counted again, the "
            f"other {unit}s' rows are that run's.</p>"
        )
    for cp in gate.get("checkpoints", []):
        page = cp.get("data_docs_page")
        docs = (
            f' · <a class="docs-link" href="{escape(link(page))}">validation in Data Docs</a>'
            + (f" (of run {escape(reused)})" if reused else "")
            if page
            else ""
        )
        noun = "tables" if cp.get("index") == "table" else "sources"
        parts.append(
            f'<div class="meta">checkpoint <strong>{escape(cp["name"])}</strong> on '
            f"<em>{escape(cp.get('asset', ''))}</em>{docs}</div>"
        )
        if cp.get("error"):
            parts.append(f'<p class="mark-bad">✗ {escape(cp["error"])}</p>')
        rows = []
        for e in cp.get("expectations", []):
            failing = e.get("failing") or []
            observed = (
                e.get("observed") if not e["success"] else _observed_summary(e, noun)
            ) or _observed_summary(e, noun)
            rows.append(
                f"<tr{'' if e['success'] else ' class=failed'}>"
                f"<td>{_mark(e['success'])}</td>"
                f"<td>{escape(e.get('check') or e['expectation'])}"
                f'<div class="meta mono">{escape(e.get("column", ""))}</div></td>'
                f'<td class="mono">{escape(observed)}'
                + (f" ({len(failing)} failing)" if failing else "")
                + f'</td><td class="mono">{escape(e.get("threshold", ""))}</td></tr>'
            )
        parts.append(
            "<table><tr><th></th><th>check</th><th>observed</th><th>threshold</th></tr>"
            + "".join(rows)
            + "</table>"
        )
    parts.append("</div>")
    return "".join(parts)


def _check_lines(checkpoint: dict[str, Any] | None, name: str) -> str:
    """Every check of a gate on one source or table: value, threshold, verdict."""
    if not checkpoint:
        return ""
    rows = []
    for e in checkpoint.get("expectations", []):
        if name not in e.get("values", {}):
            continue
        failed = name in (e.get("failing") or []) or (not e["success"] and not e.get("failing"))
        detail = e.get("details", {}).get(name)
        value = _show(e["values"][name]) + (f" ({_show(detail)})" if detail else "")
        rows.append(
            f"<tr{' class=failed' if failed else ''}><td>{_mark(not failed)}</td>"
            f"<td>{escape(e.get('check') or e['column'])}</td>"
            f'<td class="mono">{escape(e.get("column", ""))}</td>'
            f'<td class="n mono">{escape(value)}</td>'
            f'<td class="mono">{escape(e.get("threshold", ""))}</td></tr>'
        )
    return "".join(rows)


def _samples(checkpoint: dict[str, Any] | None, name: str, what: str) -> str:
    samples = (checkpoint or {}).get("samples", {}).get(name) or []
    if not samples:
        return ""
    columns = list(dict.fromkeys(k for s in samples for k in s))
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="mono">{escape(_show(s.get(c)))}</td>' for c in columns)
        + "</tr>"
        for s in samples
    )
    return f'<h3>{escape(what)}: the newest {len(samples)}</h3><table class="samples"><tr>{head}</tr>{body}</table>'  # noqa: E501


def _checks_table(lines: str) -> str:
    if not lines:
        return ""
    return (
        "<table><tr><th></th><th>check</th><th>column</th><th>observed</th>"
        f"<th>threshold</th></tr>{lines}</table>"
    )


def _sources_section(run: dict[str, Any]) -> str:
    """bronze -> silver per source: the counts that add up, then a drill-down each."""
    bronze_cp, silver_cp = _checkpoint(run, "bronze"), _checkpoint(run, "silver")
    bronze_rows, silver_rows = _rows_by(bronze_cp), _rows_by(silver_cp)
    layers = run.get("layers", {})
    counted = layers.get("bronze", {}), layers.get("silver", {})
    sources = sorted(
        set(bronze_rows)
        | set(silver_rows)
        | {s for layer in counted for part in layer.values() for s in part}
    )
    if not sources:
        return '<p class="meta">No bronze or silver counts in this run.</p>'
    header = (
        "<tr><th>source</th><th>bronze read</th><th>quarantined</th><th>bronze records</th>"
        + "".join(f"<th>{c}</th>" for c in ACCOUNTING)
        + "<th>reject rate</th><th>changes in the log</th></tr>"
    )
    table_rows, drill = [], []
    for source in sources:
        b, s = bronze_rows.get(source, {}), silver_rows.get(source, {})
        bronze_totals, silver_totals = counted
        in_log = silver_totals.get("changes", {}).get(source)
        table_rows.append(
            f'<tr><td><a href="#source-{escape(source)}">{escape(source)}</a></td>'
            + _num(b.get("read", bronze_totals.get("records", {}).get(source)))
            + _num(b.get("quarantined", bronze_totals.get("quarantined", {}).get(source)))
            + _num(s.get("bronze_records"))
            + "".join(_num(s.get(c)) for c in ACCOUNTING)
            + _num(s.get("reject_rate"))
            + _num(in_log)
            + "</tr>"
        )
        failed = any(
            source in (e.get("failing") or [])
            for cp in (bronze_cp, silver_cp)
            if cp
            for e in cp.get("expectations", [])
        )
        adds_up = ""
        if s:
            terms = " + ".join(f"{s.get(c, 0)} {c}" for c in ACCOUNTING)
            adds_up = (
                f'<p class="adds-up mono">{s.get("bronze_records", 0)} bronze records = '
                f"{escape(terms)}; they hold {_show(in_log)} changes in the log "
                "(a record may yield several)</p>"
            )
        drill.append(
            f'<details id="source-{escape(source)}"{" open" if failed else ""}>'
            f"<summary>{escape(source)} "
            f'<span class="meta">{_show(b.get("read"))} read · '
            f"{_show(b.get('quarantined'))} quarantined · {_show(s.get('rejected'))} rejected"
            f"{' · FAILED' if failed else ''}</span></summary>"
            + adds_up
            + _checks_table(_check_lines(bronze_cp, source) + _check_lines(silver_cp, source))
            + _samples(bronze_cp, source, "Quarantined lines (bronze.cdc_quarantine)")
            + _samples(silver_cp, source, "Rejects (silver.change_log_rejects)")
            + "</details>"
        )
    return "<table>" + header + "".join(table_rows) + "</table>" + "".join(drill)


def _gold_section(run: dict[str, Any]) -> str:
    gold = run.get("layers", {}).get("gold")
    gold_cp = _checkpoint(run, "gold")
    rows_by = _rows_by(gold_cp)
    if not gold and not rows_by:
        return '<p class="meta">Gold was not built in this run.</p>'
    gold = gold or {}
    fresh = table_freshness(run)
    tables = sorted(set(gold.get("rows", {})) | set(rows_by))
    header = (
        "<tr><th>table</th><th>rows</th><th>live rows</th><th>changes applied</th>"
        "<th>states rejected</th><th>fresh</th></tr>"
    )
    table_rows, drill = [], []
    for table in tables:
        g = rows_by.get(table, {})
        freshness = human_seconds(fresh[table]) if table in fresh else None
        table_rows.append(
            f'<tr><td><a href="#table-{escape(table)}">{escape(table)}</a></td>'
            + _num(gold.get("rows", {}).get(table, g.get("rows")))
            + _num(g.get("live_rows"))
            + _num(gold.get("applied", {}).get(table, 0 if gold else None))
            + _num(gold.get("rejected", {}).get(table, g.get("rejected_states")))
            + _num(freshness)
            + "</tr>"
        )
        failed = any(
            table in (e.get("failing") or []) for e in (gold_cp or {}).get("expectations", [])
        )
        drill.append(
            f'<details id="table-{escape(table)}"{" open" if failed else ""}>'
            f"<summary>{escape(table)} "
            f'<span class="meta">{_show(g.get("entity_kind"))} · {_show(g.get("rows"))} rows'
            f" · {_show(gold.get('applied', {}).get(table))} changes applied"
            f"{' · fresh ' + freshness if freshness else ''}"
            f"{' · FAILED' if failed else ''}</span></summary>"
            + _checks_table(_check_lines(gold_cp, table))
            + _samples(gold_cp, table, "Rejected states and cast failures (lakehouse.gold_rejects)")
            + "</details>"
        )
    return "<table>" + header + "".join(table_rows) + "</table>" + "".join(drill)


def _total(run: dict[str, Any], layer: str, key: str) -> int:
    return sum(run.get("layers", {}).get(layer, {}).get(key, {}).values())


def _run_time(run_id: str) -> str:
    """A run id (a UTC timestamp) as the report prints times."""
    try:
        moment = datetime.strptime(run_id, "%Y%m%dT%H%M%S%fZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return run_id
    return _when(moment.timestamp())


def _idle_row(stretch: IdleStretch) -> str:
    span = _run_time(stretch.first)
    if stretch.runs > 1:
        span += f" to {_run_time(stretch.last)}"
    noun = "run" if stretch.runs == 1 else "runs"
    return (
        f'<tr class="idle"><td colspan="11">⋯ {stretch.runs} {noun} that changed nothing'
        f" ({escape(span)})</td></tr>"
    )


def _trend(runs: list[dict[str, Any]], idle_after: Mapping[str, IdleStretch]) -> str:
    rows = []
    for run in runs:
        if (stretch := idle_after.get(str(run.get("run_id")))) is not None:
            rows.append(_idle_row(stretch))
        # ↺: passed without a validation (as in an earlier run, nothing it checks changed)
        gates = " ".join(
            f"{layer[0].upper()}&nbsp;{'✓' if g.get('success') else '✗'}"
            + ("↺" if g.get("reused_from") else "")
            for layer in LAYERS
            if (g := run.get("gates", {}).get(layer)) is not None
        )
        row_class = "" if run.get("status") == "succeeded" else ' class="failed"'
        rows.append(
            f"<tr{row_class}><td>{escape(run.get('run_id', ''))}</td>"
            f"<td>{escape(run.get('command', 'run'))}</td>"
            f"<td>{_when(run.get('started_at'))}</td><td>{escape(str(run.get('status')))}</td>"
            + _num(_duration(run))
            + _num(_total(run, "bronze", "records"))
            + _num(_total(run, "bronze", "quarantined"))
            + _num(_total(run, "silver", "changes"))
            + _num(_total(run, "silver", "rejects"))
            + _num(_total(run, "gold", "rows"))
            + f"<td>{gates}</td></tr>"
        )
    return (
        "<table><tr><th>run</th><th>command</th><th>started</th><th>status</th><th>time</th>"
        "<th>bronze records</th><th>quarantined</th><th>changes</th><th>rejects</th>"
        f"<th>gold rows</th><th>gates</th></tr>{''.join(rows)}</table>"
        '<p class="meta">↺: the gate was not validated in that run (nothing it checks had '
        "changed since it last passed); its result is that earlier run's. ⋯: runs that "
        "changed nothing (every gate passed unchecked, nothing applied to gold), counted, "
        "not listed: the table and the charts keep to the runs that did something.</p>"
    )


def _timings(run: dict[str, Any]) -> str:
    steps = run.get("timings", {})
    order = [s for layer in LAYERS for s in (layer, f"{layer} gate") if s in steps]
    timings = "".join(
        f"<tr><td>{escape(step)}</td>{_num(f'{steps[step]:.1f} s')}</tr>"
        for step in order + sorted(set(steps) - set(order))
    )
    validating = sum(sec for step, sec in steps.items() if is_gate_step(step))
    if steps:
        share = validating / max(sum(steps.values()), 1e-9)
        timings += (
            f"<tr class=sum><td>gates, all (deciding, and validating unless reused)</td>"
            f"{_num(f'{validating:.1f} s ({share:.0%} of the run)')}</tr>"
        )
    return f"<table><tr><th>step</th><th>seconds</th></tr>{timings}</table>"


def render_page(
    runs: list[dict[str, Any]],
    docs_href: str,
    link: Callable[[str], str] | None = None,
    idle_after: Mapping[str, IdleStretch] | None = None,
) -> str:
    """The summary page for ``runs`` (newest first). ``link`` turns a Data Docs page's
    path into the page's href (default: the path as a file URL). ``idle_after``: the
    runs that changed nothing after each of ``runs`` (``RunHistory.idle_after``)."""
    link = link or (lambda path: Path(path).as_uri())
    idle_after = idle_after or {}
    if not runs:
        body = "<p>No runs yet: <code>lakehouse run</code> writes the first summary.</p>"
        return _page("no runs yet", body)
    run = runs[0]
    gates = run.get("gates", {})
    failures = [f"{layer}: {f}" for layer, g in gates.items() for f in g.get("failures", [])]
    callout = ""
    if failures:
        items = "".join(f"<li>{escape(f)}</li>" for f in failures)
        callout = f'<div class="callout"><strong>Failed checks</strong><ul>{items}</ul></div>'
    status = escape(str(run.get("status")))
    verdict = _badge(run.get("status") == "succeeded", "run succeeded", f"run {status}")
    latest = (
        f"latest: {escape(run.get('command', 'run'))} {escape(run.get('run_id', ''))} · "
        f"{_when(run.get('started_at'))} · {_duration(run)}"
    )
    cards = "".join(_gate_card(layer, gates.get(layer), link) for layer in LAYERS)
    body = f"""
<header><h1>cdc-lakehouse · data quality</h1>{verdict}
<span class="meta">{latest}</span>
<a href="{escape(docs_href)}">Data Docs →</a></header>
<main>
{callout}
<h2>Trends</h2>
{_charts(runs)}
<h2>Quality gates: every check, observed value and threshold</h2>
<div class="gates">{cards}</div>
<h2>Bronze → silver, per source</h2>
<p class="meta">Each bronze record is a change in the log, a redelivery of one, a reject,
a no-op (a Kafka tombstone) or skipped (a message its format defines as no change);
anything else is unaccounted and fails the silver gate. Open a source for its checks and a
few of its quarantined lines and rejects.</p>
{_sources_section(run)}
<h2>Gold tables</h2>
{_gold_section(run)}
<h2>Run time</h2>
{_timings(run)}
<h2>Last {len(runs)} runs{_idle_heading(idle_after)}</h2>
{_trend(runs, idle_after)}
</main>"""
    return _page(status, body)


def _idle_heading(idle_after: Mapping[str, IdleStretch]) -> str:
    idle = sum(stretch.runs for stretch in idle_after.values())
    return f", and {idle} between them that changed nothing" if idle else ""


def _page(title: str, body: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>cdc-lakehouse data quality · {title}</title>"
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}</style>'
        f"</head><body>{body}</body></html>"
    )


def write_report(reports_dir: Path, runs_dir: Path, docs_index: Path) -> Path:
    """Write ``reports_dir/index.html`` from the run summaries; return its path."""
    reports_dir.mkdir(parents=True, exist_ok=True)
    page = reports_dir / "index.html"
    docs_href = os.path.relpath(docs_index, reports_dir)

    def link(path: str) -> str:
        # Relative, so the folder works when moved, served or kept as a CI artifact.
        return urllib.parse.quote(Path(os.path.relpath(path, reports_dir)).as_posix())

    history = load_history(runs_dir)
    page.write_text(
        render_page(history.runs, docs_href, link, history.idle_after), encoding="utf-8"
    )
    return page


def serve(folder: Path, port: int) -> None:
    """Serve the report folder on 127.0.0.1 only, until interrupted."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        print(
            f"serving {folder} at http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)",
            flush=True,
        )
        server.serve_forever()
