"""The report's charts, drawn with matplotlib as inline SVG: offline, no script, no CDN.

Each function takes run summaries (dicts as ``RunSummary`` saves them, oldest first) and
returns an ``<svg>`` element, or None when there is nothing to draw. matplotlib is imported
lazily: without it ``available()`` is False and the report says so instead of the charts.

A continuous run rewrites the report every cycle, and a quiet cycle leaves the runs of the
two trend charts as they were (the report leaves out runs that changed nothing): each is
drawn from the numbers it shows, and the last drawings are kept for the process, so such
a cycle does not pay matplotlib again (0.1 to 0.2 s a chart).
"""

from __future__ import annotations

import functools
import io
import math
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pyspark_jobs.durations import human_seconds
from pyspark_jobs.quality.definitions import LAYERS
from pyspark_jobs.quality.gate_steps import is_gate_step

COLORS = {"bronze": "#b08d57", "silver": "#8c959f", "gold": "#d4a72c", "gates": "#0969da"}


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    return figure


def _svg(figure: Any, title: str) -> str:
    """The figure as an inline ``<svg>`` (text kept as text, stable ids, no XML prologue)."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "lakehouse"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Title": title})
    svg = buffer.getvalue()
    # No XML prologue and no RDF metadata block (namespace URLs, nothing a page needs).
    return re.sub(r"\s*<metadata>.*?</metadata>", "", svg[svg.index("<svg") :], flags=re.S)


def _style(axes: Any) -> None:
    axes.spines[["top", "right"]].set_visible(False)
    axes.tick_params(labelsize=8)
    axes.grid(axis="y", color="#d0d7de", linewidth=0.6)
    axes.set_axisbelow(True)


def _run_labels(runs: Sequence[dict[str, Any]]) -> list[str]:
    labels = []
    for run in runs:
        started = run.get("started_at")
        when = datetime.fromtimestamp(started).strftime("%m-%d %H:%M") if started else "?"
        labels.append(when)
    return labels


def run_time_chart(runs: Sequence[dict[str, Any]]) -> str | None:
    """Stacked bars: seconds of bronze, silver, gold and the three gates, per run."""
    timed = [r for r in runs if r.get("timings")]
    if not timed:
        return None
    heights = tuple(
        tuple(
            sum(s for k, s in r["timings"].items() if is_gate_step(k))
            if part == "gates"
            else float(r["timings"].get(part, 0.0))
            for r in timed
        )
        for part in (*LAYERS, "gates")
    )
    return _draw_run_time(tuple(_run_labels(timed)), heights)


@functools.lru_cache(maxsize=2)
def _draw_run_time(labels: tuple[str, ...], heights: tuple[tuple[float, ...], ...]) -> str:
    """``heights``: per part (the layers, then the gates), its seconds per run."""
    figure = _figure(7.2, 2.6)
    axes = figure.add_subplot()
    x = list(range(len(labels)))
    bottom = [0.0] * len(labels)
    for part, part_heights in zip((*LAYERS, "gates"), heights, strict=True):
        axes.bar(x, part_heights, bottom=bottom, color=COLORS[part], label=part, width=0.7)
        bottom = [b + h for b, h in zip(bottom, part_heights, strict=True)]
    axes.set_xticks(x, labels, rotation=45, ha="right")
    axes.set_ylabel("seconds", fontsize=8)
    axes.set_title("Run time per layer, last runs", fontsize=10, loc="left")
    axes.set_ylim(0, max(bottom) * 1.25 or 1)
    axes.legend(fontsize=7, ncols=4, frameon=False, loc="upper left")
    _style(axes)
    return _svg(figure, "run time per layer")


def source_trend_chart(runs: Sequence[dict[str, Any]]) -> str | None:
    """Lines per source: changes (solid) and rejects (dashed) silver holds after each run."""
    built = [r for r in runs if r.get("layers", {}).get("silver")]
    if not built:
        return None
    sources = sorted(
        {s for r in built for key in ("changes", "rejects") for s in r["layers"]["silver"][key]}
    )
    lines = tuple(
        (
            source,
            tuple(r["layers"]["silver"].get("changes", {}).get(source, 0) for r in built),
            tuple(r["layers"]["silver"].get("rejects", {}).get(source, 0) for r in built),
        )
        for source in sources
    )
    return _draw_source_trend(tuple(_run_labels(built)), lines)


@functools.lru_cache(maxsize=2)
def _draw_source_trend(
    labels: tuple[str, ...], lines: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...]
) -> str:
    """``lines``: per source, its changes and its rejects per run."""
    figure = _figure(7.2, 2.8)
    axes = figure.add_subplot()
    x = list(range(len(labels)))
    palette = [f"C{i % 10}" for i in range(len(lines))]
    for (source, changes, rejects), color in zip(lines, palette, strict=True):
        axes.plot(x, changes, color=color, marker="o", markersize=3, label=source)
        if any(rejects):
            axes.plot(x, rejects, color=color, linestyle="--", marker="x", markersize=3)
    axes.set_xticks(x, labels, rotation=45, ha="right")
    axes.set_ylabel("rows in silver", fontsize=8)
    axes.set_title(
        "Changes (solid) and rejects (dashed) per source, after each run", fontsize=10, loc="left"
    )
    axes.legend(fontsize=7, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    _style(axes)
    return _svg(figure, "changes and rejects per source")


def freshness_chart(freshness: dict[str, float]) -> str | None:
    """Horizontal bars: seconds from each gold table's newest applied change to the end of
    the run (log scale: minutes and years sit on one chart)."""
    if not freshness:
        return None
    tables = sorted(freshness, key=lambda t: freshness[t])
    seconds = [max(freshness[t], 1.0) for t in tables]
    figure = _figure(7.2, 0.3 * len(tables) + 0.9)
    axes = figure.add_subplot()
    bars = axes.barh(tables, seconds, color=COLORS["gold"], height=0.6)
    axes.set_xscale("log")
    axes.bar_label(bars, [human_seconds(s) for s in seconds], fontsize=7, padding=2)
    axes.set_xlim(1, 10 ** (math.log10(max(seconds)) + 1))
    axes.set_xlabel("seconds since the newest change applied (log)", fontsize=8)
    axes.set_title("Freshness per gold table, last run", fontsize=10, loc="left")
    _style(axes)
    axes.grid(axis="x", color="#d0d7de", linewidth=0.6)
    return _svg(figure, "freshness per gold table")
