"""A seeded CDC workload for the benchmark, written as landing files.

Three sources, as their connectors write them (see ``data/samples/`` and docs/formats.md):

- Debezium ``shop.users``: creates, updates and deletes, each delete followed by its
  null-value tombstone;
- DataStax CDC for Cassandra ``inventory.customers``: inserts, partial updates (one cell),
  cell tombstones and row deletes (with their null-value record);
- TigerGraph: ``Person`` attribute ops (Overwrite, Add, Max), ``WorksAt`` edges to
  ``Company`` vertices (with the target's ``insert-only``), edge and ``Person`` deletes
  (which cascade to the person's edges in gold).

A share of the records arrives out of order (swapped with one a few records later: a
newer change lands first) and a share is redelivered (the same change again, later, under
a new Kafka offset). Timestamps are either a logical clock (1 ms per change) or, for the
continuous-mode producer, the wall clock at which the file is written.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DEBEZIUM, CASSANDRA, TIGERGRAPH = "bench_debezium", "bench_cassandra", "bench_tigergraph"
SOURCES = (DEBEZIUM, CASSANDRA, TIGERGRAPH)
# Share of the changes each source gets.
SHARES = {DEBEZIUM: 0.5, CASSANDRA: 0.3, TIGERGRAPH: 0.2}
TOPICS = {DEBEZIUM: "shop.public.users", CASSANDRA: "inventory.customers", TIGERGRAPH: "tg.cdc"}
REGISTRATION_DATE = 1562202942545
START_MS = 1_700_000_000_000
# How far (in records) an out-of-order record is moved, and a redelivery comes back.
DISORDER_WINDOW = 50

# The gates' thresholds in every bench sources file.
BENCH_QUALITY = {"quarantine_rate_max": 0.01, "reject_rate_max": 0.01}
USERS_COLUMNS = {"USER_ID": "bigint", "TAX_CODE": "string", "NAME": "string", "COINS": "bigint"}


def bench_config(landing_root: Path) -> dict[str, Any]:
    """The sources file of the workload (as ``config/sources.yml`` holds it)."""
    edge_key = ["from_type", "from_uid", "to_type", "to_uid", "discriminator"]
    return {
        "quality": dict(BENCH_QUALITY),
        "sources": [
            {
                "name": DEBEZIUM,
                "format": "debezium",
                "landing": str(landing_root / DEBEZIUM),
                "entities": [
                    {"name": "shop.users", "table": "users", "key": ["USER_ID"],
                     "columns": USERS_COLUMNS},
                ],
            },
            {
                "name": CASSANDRA,
                "format": "cassandra",
                "landing": str(landing_root / CASSANDRA),
                "entities": [
                    {"name": "inventory.customers", "table": "customers",
                     "key": ["id", "registration_date"],
                     "columns": {"id": "bigint", "registration_date": "bigint",
                                 "first_name": "string", "last_name": "string",
                                 "email": "string"}},
                ],
            },
            {
                "name": TIGERGRAPH,
                "format": "tigergraph",
                "landing": str(landing_root / TIGERGRAPH),
                "entities": [
                    {"name": "Person", "table": "tg_person", "kind": "vertex", "key": ["uid"],
                     "columns": {"uid": "string", "name": "string", "score": "bigint"}},
                    {"name": "Company", "table": "tg_company", "kind": "vertex",
                     "key": ["uid"], "columns": {"uid": "string", "name": "string"}},
                    {"name": "WorksAt", "table": "tg_works_at", "kind": "edge", "key": edge_key,
                     "columns": {**{c: "string" for c in edge_key}, "weight": "bigint"}},
                ],
            },
        ],
    }  # fmt: skip


def write_bench_config(folder: Path, landing_root: Path, sources: Sequence[str] = SOURCES) -> Path:
    """Write the workload's sources file (only ``sources``) as ``folder/config/sources.yml``."""
    config = bench_config(landing_root)
    config["sources"] = [s for s in config["sources"] if s["name"] in sources]
    path = folder / "config" / "sources.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@dataclass
class _Change:
    key: Any  # the Kafka key (None for TigerGraph)
    value: Any  # the Kafka value (None for a tombstone)
    ts_ms: int


class Workload:
    """A seeded stream of changes over ``keys`` keys per source; successive ``write``
    calls continue the same streams (offsets, sequences, which keys exist)."""

    def __init__(
        self,
        keys: int,
        seed: int = 7,
        out_of_order: float = 0.05,
        redelivered: float = 0.02,
    ) -> None:
        self.keys = keys
        self.companies = max(1, keys // 10)
        self.out_of_order = out_of_order
        self.redelivered = redelivered
        self.rnd = random.Random(seed)
        self.clock_ms = START_MS
        self.offsets = dict.fromkeys(SOURCES, 0)
        self.lsn = 1000
        self.commit_pos = 0
        self.tid = 0
        self.live_users: set[int] = set()
        self.persons: set[int] = set()
        self.deleted_persons: set[int] = set()
        self.works_at: dict[int, set[int]] = {}  # person -> companies
        self.files = 0

    # -- one change per source ---------------------------------------------------------
    def _debezium(self, uid: int, ts: int) -> list[_Change]:
        self.lsn += 1
        source = {"db": "shop", "table": "users", "ts_ms": ts, "lsn": self.lsn}
        row = {
            "USER_ID": uid,
            "TAX_CODE": f"tc-{uid}",
            "NAME": f"user {uid} v{self.lsn}",
            "COINS": self.rnd.randrange(10**6),
        }
        key = {"USER_ID": uid}
        if uid in self.live_users and self.rnd.random() < 0.1:
            self.live_users.discard(uid)
            delete = {"op": "d", "before": row, "after": None, "source": source}
            return [_Change(key, delete, ts), _Change(key, None, ts)]
        op = "u" if uid in self.live_users else "c"
        self.live_users.add(uid)
        return [_Change(key, {"op": op, "before": None, "after": row, "source": source}, ts)]

    def _cassandra(self, cid: int, ts: int) -> list[_Change]:
        self.commit_pos += 1
        write_us = ts * 1000 + self.commit_pos % 1000
        key = {"id": cid, "registration_date": REGISTRATION_DATE}
        source = {
            "keyspace": "inventory",
            "table": "customers",
            "file": "commitlog-7-1.log",
            "pos": self.commit_pos,
            "ts_ms": write_us,
        }

        def cell(value: Any, deleted: bool = False) -> dict[str, Any]:
            return {"value": value, "deletion_ts": ts if deleted else None, "set": True}

        cells: dict[str, Any] = {"id": cell(cid), "registration_date": cell(REGISTRATION_DATE)}
        roll = self.rnd.random()
        if roll < 0.05:
            value = {"op": "d", "after": cells, "source": source}
            return [_Change(key, value, ts), _Change(key, None, ts)]
        names = ("first_name", "last_name", "email")
        if roll < 0.35:
            op = "i"
            cells.update({c: cell(f"{c}-{self.commit_pos}") for c in names})
        else:
            # a partial update: one cell set or deleted, the others absent (unchanged)
            op = "u"
            column = self.rnd.choice(names)
            deleted = self.rnd.random() < 0.15
            cells[column] = cell(None if deleted else f"{column}-{self.commit_pos}", deleted)
        return [_Change(key, {"op": op, "after": cells, "source": source}, ts)]

    def _tigergraph(self, pid: int, ts: int) -> list[_Change]:
        def message(
            operator: str, element: dict[str, Any], content: dict[str, Any], index: int = 0
        ) -> dict[str, Any]:
            mid = f"0|{ts}|{self.tid}|{index}"
            return {
                "mid": mid,
                "timestamp": ts,
                "operator": operator,
                **element,
                "content": content,
            }

        self.tid += 1
        person = {"type": "Person", "vid": pid, "uid": f"p{pid}"}
        roll = self.rnd.random()
        # No edge from a deleted person: in TigerGraph it would re-create the vertex, which
        # the gold gate's reconciliation counts as a deleted key live (reported to fix there).
        if roll < 0.25 and pid not in self.deleted_persons:
            employers = self.works_at.setdefault(pid, set())
            leaves = employers and self.rnd.random() < 0.3
            company = min(employers) if leaves else self.rnd.randrange(self.companies)
            target = {"type": "Company", "vid": 10**9 + company, "uid": f"c{company}"}
            edge = {"type": "edge", "typename": "WorksAt", "from": person, "to": target}
            if leaves:
                employers.discard(company)
                return [_Change(None, message("delete", edge, {}), ts)]
            employers.add(company)
            self.persons.add(pid)
            content = {"weight": {"op": "Add", "value": 1}}
            # A directed edge comes with the insert-only of its target vertex.
            target_vertex = {"type": "vertex", "typename": "Company", "vid": target["vid"],
                             "uid": target["uid"]}  # fmt: skip
            return [
                _Change(None, message("insert", edge, content), ts),
                _Change(None, message("insert-only", target_vertex, {}, index=1), ts),
            ]
        vertex = {"type": "vertex", "typename": "Person", "vid": pid, "uid": f"p{pid}"}
        if pid in self.persons and roll < 0.30:
            self.persons.discard(pid)
            self.deleted_persons.add(pid)
            self.works_at.pop(pid, None)
            return [_Change(None, message("delete", vertex, {}), ts)]
        if roll < 0.35:
            company = self.rnd.randrange(self.companies)
            content = {"name": {"op": "Overwrite", "value": f"company {company} v{self.tid}"}}
            comp = {"type": "vertex", "typename": "Company", "vid": 10**9 + company,
                    "uid": f"c{company}"}  # fmt: skip
            return [_Change(None, message("insert", comp, content), ts)]
        self.persons.add(pid)
        self.deleted_persons.discard(pid)
        op = self.rnd.choice(("Add", "Max", "Overwrite"))
        content = {
            "name": {"op": "Overwrite", "value": f"person {pid} v{self.tid}"},
            "score": {"op": op, "value": self.rnd.randrange(1, 100)},
        }
        return [_Change(None, message("insert", vertex, content), ts)]

    # -- streams and files -------------------------------------------------------------
    def changes(
        self, events: int, keys: Sequence[int] | None = None, now_ms: int | None = None
    ) -> dict[str, list[_Change]]:
        """About ``events`` changes split over the sources (by ``SHARES``), on keys drawn
        from ``keys`` (default: all); timestamps from ``now_ms`` or the logical clock."""
        pool = keys if keys is not None else range(self.keys)
        makers = {
            DEBEZIUM: self._debezium,
            CASSANDRA: self._cassandra,
            TIGERGRAPH: self._tigergraph,
        }
        out: dict[str, list[_Change]] = {}
        for name in SOURCES:
            changes: list[_Change] = []
            target = round(events * SHARES[name])
            while len(changes) < target:
                if now_ms is None:
                    self.clock_ms += 1
                changes += makers[name](self.rnd.choice(pool), now_ms or self.clock_ms)
            out[name] = changes
        return out

    def _disorder(self, changes: list[_Change]) -> list[_Change]:
        """Move a share of the records later (out of order) and repeat a share later
        (redelivered), within ``DISORDER_WINDOW`` records."""
        changes = list(changes)
        for i in range(len(changes)):
            if self.rnd.random() < self.out_of_order:
                j = min(len(changes) - 1, i + self.rnd.randrange(1, DISORDER_WINDOW))
                changes[i], changes[j] = changes[j], changes[i]
        out: list[_Change] = []
        later: list[tuple[int, _Change]] = []
        for i, change in enumerate(changes):
            out.append(change)
            if change.value is not None and self.rnd.random() < self.redelivered:
                later.append((i + self.rnd.randrange(1, DISORDER_WINDOW), change))
            while later and later[0][0] <= i:
                out.append(later.pop(0)[1])
            later.sort(key=lambda item: item[0])
        return out + [change for _, change in later]

    def write(
        self,
        landing_root: Path,
        events: int,
        keys: Sequence[int] | None = None,
        now_ms: int | None = None,
        files_per_source: int = 1,
    ) -> dict[str, int]:
        """Land about ``events`` changes as new files under ``landing_root/<source>/``;
        return the records written per source (tombstones and redeliveries included).

        Each file is landed whole (``land_file``).
        """
        written = dict.fromkeys(SOURCES, 0)
        for name, changes in self.changes(events, keys, now_ms).items():
            lines = []
            for change in self._disorder(changes):
                record = {
                    "topic": TOPICS[name],
                    "partition": 0,
                    "offset": self.offsets[name],
                    "timestamp": change.ts_ms,
                    "key": change.key,
                    "value": change.value,
                }
                self.offsets[name] += 1
                lines.append(json.dumps(record, separators=(",", ":")))
            chunk = -(-len(lines) // files_per_source) if lines else 0
            for part in range(files_per_source):
                block = lines[part * chunk : (part + 1) * chunk]
                if not block:
                    continue
                self.files += 1
                land_file(landing_root, name, self.files, block)
            written[name] = len(lines)
        return written


def land_file(landing_root: Path, source: str, number: int, lines: Sequence[str]) -> Path:
    """Land ``lines`` as ``landing_root/<source>/part-<number>.jsonl``: written aside and
    renamed into place, so a running ingest never reads half a file."""
    folder = landing_root / source
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"part-{number:06d}.jsonl"
    aside = landing_root / f".{source}-{number:06d}.tmp"
    aside.write_text("\n".join(lines) + "\n")
    os.replace(aside, final)
    return final
