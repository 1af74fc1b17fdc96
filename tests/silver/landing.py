"""Landing files and a sources config for silver tests, written to a temporary folder."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import samples_dir

# Entities of the committed config, reused as declared (same names, keys and types).
_COMMITTED = Path(__file__).resolve().parents[2] / "config" / "sources.yml"


# A Debezium insert of a new user into the samples' shop.public.users (USER_ID 990): a new
# record for a lake built from the samples.
NEW_USER = {
    "op": "c",
    "before": None,
    "after": {"USER_ID": 990, "TAX_CODE": "tc-990", "NAME": "Cy", "COINS": 1},
    "source": {"db": "shop", "schema": "public", "table": "users", "ts_ms": 1700000900000,
               "lsn": 99001},
    "ts_ms": 1700000900001,
}  # fmt: skip


def record(topic: str, offset: int, key: Any, value: Any, ts: int = 1700000000000) -> dict:
    """One Kafka record as a landing line holds it."""
    return {
        "topic": topic,
        "partition": 0,
        "offset": offset,
        "timestamp": ts,
        "key": key,
        "value": value,
    }


def write_lines(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    """Write records compactly, one per line, as the bundled samples are written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in records)
    )


def copy_sample(fmt: str, landing: Path) -> None:
    """Copy the bundled samples of a format into a landing folder."""
    landing.mkdir(parents=True, exist_ok=True)
    for sample in (samples_dir() / fmt).glob("*.jsonl"):
        shutil.copy(sample, landing / sample.name)


def sample_records(fmt: str) -> list[dict]:
    """The bundled sample records of a format, in file order."""
    return [
        json.loads(line)
        for sample in sorted((samples_dir() / fmt).glob("*.jsonl"))
        for line in sample.read_text().splitlines()
    ]


def write_config(path: Path, landings: Mapping[str, Path]) -> Path:
    """A sources file with the committed entries of the named sources, landing elsewhere."""
    committed = yaml.safe_load(_COMMITTED.read_text())
    sources = []
    for source in committed["sources"]:
        if source["name"] in landings:
            sources.append({**source, "landing": str(landings[source["name"]])})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"sources": sources}, sort_keys=False))
    return path
