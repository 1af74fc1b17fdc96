"""The data-quality report: GX Data Docs plus one self-contained run summary page.

``<lake>/reports/index.html`` shows the latest run (per layer and source: records in,
changes, rejects, rows; every gate's expectations with what failed; run times) and the
last runs from ``<lake>/_state/runs/*.json`` as a trend table. It links to GX's Data
Docs for the full validation results. Plain HTML and inline CSS: it opens from disk,
from a CI artifact or behind ``lakehouse report --serve`` alike.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import Any

LAYERS = ("bronze", "silver", "gold")
TREND_RUNS = 20

CSS = """
:root { --ok:#1a7f37; --bad:#cf222e; --muted:#57606a; --line:#d0d7de; --bg:#f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color:#1f2328;
       margin:0; background:#fff; }
header { padding:18px 28px; border-bottom:1px solid var(--line); background:var(--bg);
         display:flex; align-items:center; gap:16px; flex-wrap:wrap; }
header h1 { font-size:20px; margin:0; }
main { padding:8px 28px 40px; max-width:1200px; }
h2 { font-size:16px; margin:26px 0 10px; border-bottom:1px solid var(--line); padding-bottom:4px; }
.badge { display:inline-block; padding:2px 10px; border-radius:12px; font-weight:600;
         color:#fff; font-size:12px; letter-spacing:.02em; }
.ok { background:var(--ok); } .bad { background:var(--bad); } .skip { background:#8c959f; }
.meta { color:var(--muted); }
.gates { display:grid; grid-template-columns:repeat(auto-fit, minmax(330px, 1fr)); gap:14px; }
.gate { border:1px solid var(--line); border-radius:8px; padding:12px 14px; }
.gate.failed { border-color:var(--bad); box-shadow:0 0 0 1px var(--bad) inset; }
.gate h3 { margin:0 0 6px; font-size:15px; display:flex; justify-content:space-between; }
.gate ul { margin:4px 0 8px; padding-left:0; list-style:none; }
.gate li { padding:1px 0; font-size:12px;
          font-family: ui-monospace, SFMono-Regular, Menlo, monospace; overflow-wrap:anywhere; }
.gate li.fail { color:var(--bad); font-weight:600; }
.cp { font-weight:600; margin-top:6px; font-size:13px; }
table { border-collapse:collapse; width:100%; margin:4px 0 8px; }
th, td { border-bottom:1px solid var(--line); padding:5px 8px; text-align:left; }
th { background:var(--bg); font-weight:600; font-size:12px; color:var(--muted);
     text-transform:uppercase; }
td.n { text-align:right; font-variant-numeric: tabular-nums; white-space:nowrap; }
tr.failed td { background:#fff5f5; }
a { color:#0969da; }
.callout { border-left:4px solid var(--bad); background:#fff5f5; padding:10px 14px; margin:16px 0; }
.callout ul { margin:6px 0 0; }
"""


def load_runs(runs_dir: Path, limit: int = TREND_RUNS) -> list[dict[str, Any]]:
    """The last ``limit`` run summaries, newest first (unreadable files are skipped)."""
    runs = []
    for path in sorted(runs_dir.glob("*.json"), reverse=True)[:limit]:
        try:
            runs.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    return runs


def _when(ts: float | None) -> str:
    if not ts:
        return ""
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _badge(success: bool | None, yes: str = "passed", no: str = "FAILED") -> str:
    if success is None:
        return '<span class="badge skip">not run</span>'
    return f'<span class="badge {"ok" if success else "bad"}">{yes if success else no}</span>'


def _num(value: Any) -> str:
    return f'<td class="n">{escape(str(value))}</td>'


def _duration(run: dict[str, Any]) -> str:
    if run.get("finished_at") and run.get("started_at"):
        return f"{run['finished_at'] - run['started_at']:.1f} s"
    return ""


def _sources_table(run: dict[str, Any]) -> str:
    layers = run.get("layers", {})
    bronze, silver = layers.get("bronze", {}), layers.get("silver", {})
    # A source with nothing in silver has 0 there once silver was built; "–" if not built.
    none = 0 if silver else "–"
    sources = sorted(
        set(bronze.get("records", {}))
        | set(bronze.get("quarantined", {}))
        | set(silver.get("changes", {}))
        | set(silver.get("rejects", {}))
    )
    rows = "".join(
        f"<tr><td>{escape(s)}</td>"
        + _num(bronze.get("records", {}).get(s, 0))
        + _num(bronze.get("quarantined", {}).get(s, 0))
        + _num(silver.get("changes", {}).get(s, none))
        + _num(silver.get("rejects", {}).get(s, none))
        + "</tr>"
        for s in sources
    )
    if not rows:
        return '<p class="meta">No bronze or silver counts in this run.</p>'
    return (
        "<table><tr><th>source</th><th>bronze records</th><th>quarantined</th>"
        f"<th>silver changes</th><th>rejects</th></tr>{rows}</table>"
    )


def _gold_table(run: dict[str, Any]) -> str:
    gold = run.get("layers", {}).get("gold")
    if not gold:
        return '<p class="meta">Gold was not built in this run.</p>'
    rows = "".join(
        f"<tr><td>{escape(t)}</td>"
        + _num(n)
        + _num(gold.get("applied", {}).get(t, 0))
        + _num(gold.get("rejected", {}).get(t, 0))
        + "</tr>"
        for t, n in sorted(gold.get("rows", {}).items())
    )
    return (
        "<table><tr><th>table</th><th>rows</th><th>changes applied</th>"
        f"<th>states rejected (lakehouse.gold_rejects)</th></tr>{rows}</table>"
    )


def _gate_card(layer: str, gate: dict[str, Any] | None, docs_href: str) -> str:
    if gate is None:
        return (
            f'<div class="gate"><h3><span>{layer}</span>{_badge(None)}</h3>'
            '<p class="meta">Not validated in this run (an earlier step stopped it).</p></div>'
        )
    parts = [
        f'<div class="gate{"" if gate.get("success") else " failed"}" id="gate-{layer}">',
        f"<h3><span>{layer}</span>{_badge(gate.get('success'))}</h3>",
        f'<div class="meta">{gate.get("seconds", 0):.1f} s · '
        f'<a href="{escape(docs_href)}">validation results in Data Docs</a></div>',
    ]
    for cp in gate.get("checkpoints", []):
        parts.append(f'<div class="cp">{escape(cp["name"])} {_badge(cp["success"])}</div><ul>')
        if cp.get("error"):
            parts.append(f'<li class="fail">✗ {escape(cp["error"])}</li>')
        for e in cp.get("expectations", []):
            mark, cls = ("✓", "") if e["success"] else ("✗", ' class="fail"')
            observed = f" — {escape(e['observed'])}" if e.get("observed") else ""
            parts.append(f"<li{cls}>{mark} {escape(e['expectation'])}{observed}</li>")
        parts.append("</ul>")
    parts.append("</div>")
    return "".join(parts)


def _total(run: dict[str, Any], layer: str, key: str) -> int:
    return sum(run.get("layers", {}).get(layer, {}).get(key, {}).values())


def _trend(runs: list[dict[str, Any]]) -> str:
    rows = []
    for run in runs:
        gates = " ".join(
            f"{layer[0].upper()}&nbsp;{'✓' if g.get('success') else '✗'}"
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
    )


def render_page(runs: list[dict[str, Any]], docs_href: str) -> str:
    """The summary page for ``runs`` (newest first)."""
    if not runs:
        body = "<p>No runs yet: <code>lakehouse run</code> writes the first summary.</p>"
        return _page("no runs yet", body)
    run = runs[0]
    gates = run.get("gates", {})
    failures = [f"{layer}: {f}" for layer, g in gates.items() for f in g.get("failures", [])]
    callout = ""
    if failures:
        items = "".join(f"<li>{escape(f)}</li>" for f in failures)
        callout = f'<div class="callout"><strong>Failed expectations</strong><ul>{items}</ul></div>'
    steps = run.get("timings", {})
    order = [s for layer in LAYERS for s in (layer, f"{layer} gate") if s in steps]
    timings = "".join(
        f"<tr><td>{escape(step)}</td>{_num(f'{steps[step]:.1f} s')}</tr>"
        for step in order + sorted(set(steps) - set(order))
    )
    validating = sum(sec for step, sec in steps.items() if step.endswith(" gate"))
    if steps:
        share = validating / max(sum(steps.values()), 1e-9)
        timings += (
            f"<tr><td><strong>validation, all gates</strong></td>"
            f"{_num(f'{validating:.1f} s ({share:.0%} of the run)')}</tr>"
        )
    status = escape(str(run.get("status")))
    verdict = _badge(run.get("status") == "succeeded", "run succeeded", f"run {status}")
    latest = (
        f"latest: {escape(run.get('command', 'run'))} {escape(run.get('run_id', ''))} · "
        f"{_when(run.get('started_at'))} · {_duration(run)}"
    )
    cards = "".join(_gate_card(layer, gates.get(layer), docs_href) for layer in LAYERS)
    body = f"""
<header><h1>cdc-lakehouse · data quality</h1>{verdict}
<span class="meta">{latest}</span>
<a href="{escape(docs_href)}">Data Docs →</a></header>
<main>
{callout}
<h2>Quality gates</h2>
<div class="gates">{cards}</div>
<h2>Bronze and silver, per source</h2>
{_sources_table(run)}
<h2>Gold tables</h2>
{_gold_table(run)}
<h2>Run time</h2>
<table><tr><th>step</th><th>seconds</th></tr>{timings}</table>
<h2>Last {len(runs)} runs</h2>
{_trend(runs)}
</main>"""
    return _page(escape(str(run.get("status"))), body)


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
    page.write_text(render_page(load_runs(runs_dir), docs_href), encoding="utf-8")
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
