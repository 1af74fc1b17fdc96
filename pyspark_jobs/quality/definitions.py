"""The committed gate definitions: ``expectations/gates.yml`` and ``expectations/suites/``.

Suites are GX 1.x suite JSON kept in git; ``gates.yml`` names each layer's checkpoint, its
suite, the summary frame it validates and the frame's data asset name. Everything is
checked here, so a typo fails the gate (closed) instead of silently validating less.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pyspark_jobs.settings import PROJECT_ROOT

EXPECTATIONS_DIR = PROJECT_ROOT / "expectations"
LAYERS = ("bronze", "silver", "gold")


class GateDefinitionError(ValueError):
    """A gate or suite file that cannot be used; names the file and the problem."""


@dataclass(frozen=True)
class CheckpointSpec:
    """A layer's checkpoint: a suite and the summary frame it validates.

    ``index`` names the frame's row key (``source`` or ``table``); ``asset`` is the GX
    data asset name (what the frame summarises).
    """

    layer: str
    name: str
    suite: dict[str, Any]
    frame: str
    index: tuple[str, ...] = field(default_factory=tuple)
    asset: str = ""


def _load_suite(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise GateDefinitionError(f"{path}: suite file not found")
    try:
        suite = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise GateDefinitionError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(suite, dict) or not suite.get("name"):
        raise GateDefinitionError(f"{path}: expected an object with a `name`")
    if not isinstance(suite.get("expectations"), list) or not suite["expectations"]:
        raise GateDefinitionError(f"{path}: expected a non-empty list `expectations`")
    return suite


def load_checkpoint(layer: str, root: Path = EXPECTATIONS_DIR) -> CheckpointSpec:
    """The checkpoint of one layer's gate, with its suite, as committed."""
    if layer not in LAYERS:
        raise GateDefinitionError(f"unknown layer {layer!r}: expected one of {', '.join(LAYERS)}")
    gates_file = root / "gates.yml"
    gates = yaml.safe_load(gates_file.read_text())
    entry = gates.get(layer) if isinstance(gates, dict) else None
    if not isinstance(entry, dict):
        raise GateDefinitionError(f"{gates_file}: {layer}: expected a checkpoint (a mapping)")
    missing = {"checkpoint", "suite", "frame", "asset", "index"} - set(entry)
    if missing:
        raise GateDefinitionError(f"{gates_file}: {layer}: missing {', '.join(sorted(missing))}")
    suite_path = root / "suites" / f"{entry['suite']}.json"
    suite = _load_suite(suite_path)
    return CheckpointSpec(
        layer=layer,
        name=entry["checkpoint"],
        suite=suite,
        frame=entry["frame"],
        index=tuple(entry["index"]),
        asset=entry["asset"],
    )


def load_gate(layer: str, root: Path = EXPECTATIONS_DIR) -> list[CheckpointSpec]:
    """A layer's gate as a list of checkpoints: one per layer (one summary frame)."""
    return [load_checkpoint(layer, root)]
