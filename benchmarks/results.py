"""The benchmark's results: JSON (everything), a markdown table and a PNG chart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LAYER_NAMES = ("bronze", "silver", "gold", "gates")


def _gib(n: float | None) -> str:
    return "–" if not n else f"{n / 2**30:.2f} GiB"


def _s(n: float | None) -> str:
    return "–" if n is None else f"{n:.1f}"


def _rate(records: int, seconds: float | None) -> str:
    return "–" if not seconds else f"{records / seconds:,.0f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "–" if not a or not b else f"{a / b:.2f}×"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    aligns = ["---"] + ["---:"] * (len(header) - 1)
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(aligns) + " |",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _error(part: dict[str, Any]) -> str:
    return f"failed: {part['error'].splitlines()[0]}"


def markdown(results: dict[str, Any]) -> str:
    """The results as a markdown section (what ``make bench`` prints and saves)."""
    machine, params, load = results["machine"], results["parameters"], results["load_average"]
    workload = results["workload"]
    total = workload["total_records"]
    lines = [
        f"### `make bench`, {results['started_at'][:16].replace('T', ' ')} UTC",
        "",
        f"{machine['cores']} cores, {machine['memory_gib']:.0f} GiB; load average (1 min) "
        f"{load['before']:.1f} before, {load['after']:.1f} after (the bench's own processes)"
        # Only the load before the bench tells of other work on the machine.
        + (" (a shared machine: figures inflated)" if load["before"] > 1 else "")
        + f"; pyspark {machine['pyspark']}, delta-spark {machine['delta_spark']}.",
        "",
        f"Workload: {total:,} records in {workload['landing_mib']:.1f} MiB of landing files "
        + "("
        + ", ".join(f"{n:,} {s.removeprefix('bench_')}" for s, n in workload["records"].items())
        + f"), {params['keys']:,} keys per source, {params['out_of_order']:.0%} out of order, "
        f"{params['redelivered']:.0%} redelivered, seed {params['seed']}.",
        "",
    ]
    ours, floor = results["ours"], results["copy_floor"]
    rows = []
    if "error" in floor:
        rows.append(["copy floor (read once, write once to Delta)", _error(floor), "", ""])
    else:
        rows.append(
            [
                "copy floor (read once, write once to Delta)",
                _s(floor["seconds"]),
                _rate(total, floor["seconds"]),
                _gib(floor["peak_rss_bytes"]),
            ]
        )
    if "error" in ours:
        rows.append(["`lakehouse run`", _error(ours), "", ""])
    else:
        for layer in LAYER_NAMES:
            figures = ours["layers"][layer]
            name = "gates (3)" if layer == "gates" else layer
            rows.append(
                [
                    f"`lakehouse run`: {name}",
                    _s(figures["seconds"]),
                    _rate(total, figures["seconds"]),
                    _gib(figures["peak_rss_bytes"]),
                ]
            )
        rows.append(
            [
                f"`lakehouse run`: total ({ours['status']})",
                _s(ours["seconds"]),
                _rate(total, ours["seconds"]),
                _gib(ours["peak_rss_bytes"]),
            ]
        )
        rows.append(
            [
                "`lakehouse run` ÷ copy floor",
                _ratio(ours["seconds"], floor.get("seconds")),
                "",
                "",
            ]
        )
    lines += _table(["end to end, all sources", "seconds", "events/s", "driver peak RSS"], rows)
    lines += [
        "",
        "Session start (a JVM per measurement) is not counted above: "
        + ", ".join(
            f"{name} {_s(part.get('session_seconds'))} s"
            for name, part in (("copy floor", floor), ("`lakehouse run`", ours))
        )
        + ".",
        "",
    ]

    debezium = results["debezium"]
    records = debezium["records"]
    rows = []
    mine = debezium["ours"]
    rows.append(
        ["`lakehouse run`, Debezium source only"]
        + (
            [_error(mine), "", ""]
            if "error" in mine
            else [_s(mine["seconds"]), _rate(records, mine["seconds"]), "(ours)"]
        )
    )
    peer = debezium["peer"]
    if "error" in peer:
        rows.append(["hand-written foreachBatch MERGE", _error(peer), "", ""])
    else:
        diff = peer["differences"]
        same = "yes" if diff == {"missing": 0, "extra": 0} else "**NO**"
        rows.append(
            [
                "hand-written foreachBatch MERGE",
                _s(peer["seconds"]),
                _rate(records, peer["seconds"]),
                f"{same} ({diff['missing']} missing, {diff['extra']} extra)",
            ]
        )
    auto = debezium["auto_cdc"]
    if "error" in auto:
        rows.append(["AUTO CDC (`create_auto_cdc_flow`)", _error(auto), "", ""])
    elif auto["status"] == "refused":
        rows.append(
            [
                "AUTO CDC (`create_auto_cdc_flow`)",
                f"refused after {_s(auto['seconds'])}",
                "–",
                # a double-backtick span: the message quotes names in single backticks
                f"`` {auto['message']} ``",
            ]
        )
    else:
        diff = auto["differences"]
        same = "yes" if diff == {"missing": 0, "extra": 0} else "**NO**"
        rows.append(
            [
                "AUTO CDC (`create_auto_cdc_flow`)",
                _s(auto["seconds"]),
                _rate(records, auto["seconds"]),
                f"{same} ({diff['missing']} missing, {diff['extra']} extra)",
            ]
        )
    rows.append(
        [
            "ours ÷ hand-written MERGE",
            _ratio(mine.get("seconds"), peer.get("seconds")),
            "",
            "",
        ]
    )
    lines += _table(
        [f"Debezium part ({records:,} records)", "seconds", "events/s", "table equal to ours"],
        rows,
    )
    lines.append("")

    growth = results["cost_growth"]
    rows = []
    for label in ("B", "4B"):
        part = growth[label]
        if "error" in part:
            rows.append([label, _error(part), "", "", ""])
            continue
        rows.append(
            [
                f"base {label}",
                f"{part['keys']:,}",
                f"{part['base_records']:,}",
                f"{part['batch_records']:,} ({part['touched_keys']:,} keys)",
                _s(part["batch"]["seconds"]),
            ]
        )
    batch_seconds = [growth.get(k, {}).get("batch", {}).get("seconds") for k in ("4B", "B")]
    rows.append(["4B ÷ B", "", "", "", _ratio(*batch_seconds)])
    lines += _table(
        ["cost growth: a 1 % batch", "keys per source", "base records", "batch", "batch seconds"],
        rows,
    )
    lines.append("")

    fresh = results["freshness"]
    if "error" in fresh:
        lines.append(f"Freshness: {_error(fresh)}")
    else:
        lines += _table(
            [
                f"freshness, `run --every {params['every']:g}` at {fresh['rate']:,.0f} events/s "
                f"for {fresh['duration']:g} s",
                "p50 s",
                "p95 s",
                "max s",
                "cycles (mean s)",
                "driver peak RSS",
            ],
            [
                [
                    f"landing → visible in gold ({fresh['visible_rows']:,} rows, "
                    f"{fresh['achieved_rate']:,.0f} events/s achieved)",
                    _s(fresh["p50_seconds"]),
                    _s(fresh["p95_seconds"]),
                    _s(fresh["max_seconds"]),
                    f"{fresh['cycles']} ({_s(fresh['cycle_seconds_mean'])})",
                    _gib(fresh["peak_rss_bytes"]),
                ]
            ],
        )
    lines.append("")
    lines += warm_cycles_table(results["warm_cycles"])
    if results.get("problems"):
        lines += ["", "**Problems:**", *(f"- {p}" for p in results["problems"])]
    return "\n".join(lines) + "\n"


WARM_TARGETS = {"one_table": "≤ 5 s", "spread": "≤ 20 s"}


def warm_cycles_table(warm: dict[str, Any]) -> list[str]:
    """The warm-cycle table: each batch's steady cycle (the first in parentheses), split
    by stage."""
    if "error" in warm:
        return [f"Warm cycles: {_error(warm)}"]
    rows = []
    for kind, label in (("one_table", "to one table"), ("spread", "over every table")):
        batch = warm[kind]
        first, steady = batch["cycles"][0], batch["cycles"][-1]
        rows.append(
            [
                f"{batch['changes']:,} changes {label}",
                f"{_s(steady['seconds'])} ({_s(first['seconds'])})",
                *(_s(steady["stages"][stage]) for stage in LAYER_NAMES),
                WARM_TARGETS[kind],
            ]
        )
    header = [
        f"warm cycle, `run --every 3`, {warm['tables']} tables",
        "seconds (first)",
        *LAYER_NAMES,
        "target",
    ]
    return [
        *_table(header, rows),
        "",
        f"The first, cold cycle (creating the {warm['tables']} tables, "
        f"{warm['base_keys']} rows each): {_s(warm['cold_cycle_seconds'])} s; driver peak RSS "
        f"in the warm cycles {_gib(warm['peak_rss_bytes'])}.",
    ]


def chart(results: dict[str, Any], path: Path) -> None:
    """Four panels: end to end by layer beside the copy floor, the Debezium peers, cost
    growth, freshness."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 7))
    machine = results["machine"]
    fig.suptitle(
        f"make bench: {results['workload']['total_records']:,} records, "
        f"{machine['cores']} cores, load {results['load_average']['before']:.1f}"
    )
    ax = axes[0][0]
    ours, floor = results["ours"], results["copy_floor"]
    ax.barh(["copy floor"], [floor.get("seconds", 0)], color="grey")
    left = 0.0
    for layer in LAYER_NAMES:
        seconds = ours.get("layers", {}).get(layer, {}).get("seconds", 0)
        ax.barh(["lakehouse run"], [seconds], left=left, label=layer)
        left += seconds
    ax.set_xlabel("seconds")
    ax.set_title("end to end")
    ax.legend(fontsize="small")

    ax = axes[0][1]
    debezium = results["debezium"]
    auto = debezium["auto_cdc"]
    names = ["lakehouse run", "hand-written MERGE", "AUTO CDC"]
    seconds = [
        debezium["ours"].get("seconds", 0),
        debezium["peer"].get("seconds", 0),
        auto.get("seconds", 0) if auto.get("status") == "ran" else 0,
    ]
    ax.barh(names, seconds, color=["tab:blue", "tab:orange", "tab:green"])
    if auto.get("status") == "refused":
        ax.text(0, 2, f"  refused: {auto.get('error_class')}", va="center", fontsize="small")
    ax.set_xlabel("seconds")
    ax.set_title("Debezium part")

    ax = axes[1][0]
    growth = results["cost_growth"]
    labels = [f"base {k} ({growth[k].get('keys', 0):,} keys)" for k in ("B", "4B") if k in growth]
    values = [growth[k].get("batch", {}).get("seconds", 0) for k in ("B", "4B") if k in growth]
    ax.bar(labels, values, color="tab:purple")
    ax.set_ylabel("seconds")
    ax.set_title("a batch touching 1 % of the keys")

    ax = axes[1][1]
    fresh = results["freshness"]
    ax.bar(
        ["p50", "p95", "max"],
        [fresh.get(k) or 0 for k in ("p50_seconds", "p95_seconds", "max_seconds")],
        color="tab:red",
    )
    ax.set_ylabel("seconds")
    ax.set_title(f"freshness at {fresh.get('rate', 0):,.0f} events/s (landing → gold)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_results(results: dict[str, Any], folder: Path) -> dict[str, Path]:
    """``results.json``, ``results.md`` and ``results.png`` under ``folder`` (the latest
    run), plus a dated copy of the JSON so earlier runs stay comparable."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": folder / "results.json",
        "markdown": folder / "results.md",
        "chart": folder / "results.png",
    }
    text = json.dumps(results, indent=2, sort_keys=True)
    paths["json"].write_text(text)
    stamp = results["started_at"].replace(":", "").replace("-", "")[:15]
    (folder / f"results-{stamp}.json").write_text(text)
    paths["markdown"].write_text(markdown(results))
    chart(results, paths["chart"])
    return paths
