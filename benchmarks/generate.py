"""Generate landing files of realistic Debezium and Cassandra changes for the benchmark."""

from __future__ import annotations

import json
import random
from pathlib import Path


def _line(topic: str, offset: int, ts: int, key: dict, value: dict | None) -> str:
    record = {
        "topic": topic,
        "partition": 0,
        "offset": offset,
        "timestamp": ts,
        "key": key,
        "value": value,
    }
    return json.dumps(record, separators=(",", ":"))


def debezium_lines(records: int, keys: int, seed: int = 1) -> list[str]:
    """Creates, updates and deletes (each delete followed by its tombstone) over ``keys`` users."""
    rnd = random.Random(seed)
    lines, offset, live = [], 0, set()
    base = 1_700_000_000_000
    while len(lines) < records:
        uid = rnd.randrange(keys)
        ts = base + offset
        src = {"db": "shop", "table": "users", "ts_ms": ts, "lsn": 1000 + offset}
        row = {
            "USER_ID": uid,
            "TAX_CODE": f"tc-{uid}",
            "NAME": f"user {uid} v{offset}",
            "COINS": rnd.randrange(10**6),
        }
        if uid in live and rnd.random() < 0.1:
            lines.append(
                _line(
                    "bench.users",
                    offset,
                    ts,
                    {"USER_ID": uid},
                    {"op": "d", "before": row, "after": None, "source": src},
                )
            )
            offset += 1
            lines.append(_line("bench.users", offset, ts, {"USER_ID": uid}, None))
            live.discard(uid)
        else:
            op = "u" if uid in live else "c"
            lines.append(
                _line(
                    "bench.users",
                    offset,
                    ts,
                    {"USER_ID": uid},
                    {"op": op, "before": None, "after": row, "source": src},
                )
            )
            live.add(uid)
        offset += 1
    return lines[:records]


def cassandra_lines(records: int, keys: int, seed: int = 2) -> list[str]:
    """Inserts, partial updates, cell tombstones and row deletes over ``keys`` customers."""
    rnd = random.Random(seed)
    lines = []
    base = 1_562_202_942_000_000
    for offset in range(records):
        cid = rnd.randrange(keys)
        ts = base + offset * 1000
        key = {"id": cid, "registration_date": 1562202942545}
        source = {
            "keyspace": "inventory",
            "table": "customers",
            "file": "commitlog-6-1.log",
            "pos": offset,
            "ts_ms": ts,
        }
        cells = {
            "id": {"value": cid, "deletion_ts": None, "set": True},
            "registration_date": {"value": 1562202942545, "deletion_ts": None, "set": True},
        }
        roll = rnd.random()
        if roll < 0.05:
            op = "d"
        elif roll < 0.4:
            op = "i"
            cells.update(
                {
                    c: {"value": f"{c}-{offset}", "deletion_ts": None, "set": True}
                    for c in ("first_name", "last_name", "email")
                }
            )
        else:
            op = "u"
            col = rnd.choice(["first_name", "last_name", "email"])
            deleted = rnd.random() < 0.1
            cells[col] = {
                "value": None if deleted else f"{col}-{offset}",
                "deletion_ts": ts // 1000 if deleted else None,
                "set": True,
            }
        lines.append(
            _line(
                "bench.customers",
                offset,
                ts // 1000,
                key,
                {"op": op, "after": cells, "source": source},
            )
        )
    return lines


def write_landing(root: Path, records: int, keys: int, files: int = 8) -> dict[str, Path]:
    """Write both sources' landing files under ``root``; return their folders."""
    folders = {}
    for name, lines in (
        ("debezium", debezium_lines(records, keys)),
        ("cassandra", cassandra_lines(records, keys)),
    ):
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        chunk = -(-len(lines) // files)
        for i in range(files):
            part = lines[i * chunk : (i + 1) * chunk]
            if part:
                (folder / f"part-{i:03d}.jsonl").write_text("\n".join(part) + "\n")
        folders[name] = folder
    return folders
