"""A gold apply killed between any two of its commits loses nothing and doubles nothing.

`lakehouse.gold_pending` makes every write after the fold repeatable: this kills a real
process (SIGKILL of its group, by `LAKEHOUSE_FAULT`) at each crash point of a run in
turn — the next process resumes the staged run and is itself killed at the next point —
then compares every table with an uninterrupted apply of the same changes: gold rows,
SCD2 history (no version lost), rejects (none recorded twice), tombstones and progress.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pyspark.sql import DataFrame, SparkSession

from pyspark_jobs.config import Entity, LakehouseConfig, Source, load_config
from pyspark_jobs.faults import FAULT_ENV
from pyspark_jobs.gold.apply import apply_gold
from pyspark_jobs.settings import PROJECT_ROOT, Settings
from tests.conftest import reset_lake
from tests.gold.changelog import append, change, create_change_log

pytestmark = pytest.mark.slow

EDGE_KEY = ("from_type", "from_uid", "to_type", "to_uid", "discriminator")
USERS = Entity(
    "shop.users",
    "c_users",
    ("id",),
    {"id": "bigint", "name": "string", "n": "bigint"},
    history=True,
)
CUST = Entity("ks.cust", "c_cust", ("id",), {"id": "bigint", "a": "string", "b": "string"})
PERSON = Entity(
    "Person",
    "c_person",
    ("uid",),
    {"uid": "string", "score": "bigint"},
    kind="vertex",
    history=True,
)
KNOWS = Entity("Knows", "c_knows", EDGE_KEY, {k: "string" for k in EDGE_KEY}, kind="edge")
SHOP = Source("c_shop", "debezium", (USERS,), landing=None)
CASS = Source("c_cass", "cassandra", (CUST,), landing=None)
GRAPH = Source("c_graph", "tigergraph", (PERSON, KNOWS), landing=None)
MARKER = "__row_marker__"


def user(i, seq, name, n="1", op="upsert"):
    row = {"id": i, "name": name, "n": n} if op == "upsert" else None
    return change(SHOP, USERS, {"id": i}, op, [seq], row=row)


def cells(i, ts, insert=False, **values):
    changes = {c: ("set", v, ts) for c, v in values.items()}
    if insert:
        changes[MARKER] = ("set", None, ts)
    return change(CASS, CUST, {"id": i}, "patch", [ts, 0, 0], changes=changes)


def person(uid, seq, op="patch", **ops):
    changes = {c: (o, v, None) for c, (o, v) in ops.items()} if op != "delete" else None
    return change(GRAPH, PERSON, {"uid": uid}, op, [seq, 0, 0, 0], changes=changes)


def knows(f, t, seq):
    key = {"from_type": "Person", "from_uid": f, "to_type": "Person", "to_uid": t}
    key["discriminator"] = ""
    return change(GRAPH, KNOWS, key, "patch", [seq, 0, 0, 0], row={"hasreverseedge": False})


BATCH_1 = [
    user(1, 100, "ann"),
    user(2, 100, "bob"),
    user(3, 100, "cy"),
    user(5, 100, "eve", n="abc"),  # does not cast: rejected, never merged
    cells(1, 1000, insert=True, a="x", b="y"),
    cells(2, 1000, insert=True, a="p"),
    person("p1", 10, score=("Add", "5")),
    person("p2", 11, score=("Overwrite", "1")),
    knows("p1", "p2", 12),
    knows("p1", "p3", 13),  # outlives p2's delete
]
BATCH_2 = [
    user(1, 200, "ann2"),
    user(2, 200, "", op="delete"),
    user(1, 150, "ann-between"),  # a version between the two of the same batch
    user(3, 200, "cy2"),
    user(5, 200, "eve", n="7"),
    user(6, 200, "fay", n="xyz"),
    cells(1, 2000, a="x2"),
    change(CASS, CUST, {"id": 2}, "delete", [2000, 0, 1]),
    person("p1", 20, score=("Add", "3")),
    person("p2", 21, op="delete"),  # its Knows edge goes with it
]
# Every write of a run, in order; the resumed run passes them all again.
CRASH_POINTS = [
    "gold:staged",
    "gold:rejects",
    "gold:tombstones",
    "gold:merged:c_users",
    "gold:history:c_users",
    "gold:merged:c_person",
    "gold:history:c_person",
    "gold:written",
    "gold:progress",
]
IGNORED = {"_updated_at", "recorded_at", "applied_at"}
TABLES = {
    "gold.c_users": "gold.db/c_users",
    "gold.c_users_history": "gold.db/c_users_history",
    "gold.c_cust": "gold.db/c_cust",
    "gold.c_person": "gold.db/c_person",
    "gold.c_person_history": "gold.db/c_person_history",
    "gold.c_knows": "gold.db/c_knows",
    "lakehouse.gold_rejects": "lakehouse.db/gold_rejects",
    "lakehouse.gold_tombstones": "lakehouse.db/gold_tombstones",
    "lakehouse.gold_progress": "lakehouse.db/gold_progress",
}


def write_config(folder: Path) -> LakehouseConfig:
    def entity(e: Entity) -> dict:
        return {
            "name": e.name,
            "table": e.table,
            "key": list(e.key),
            "columns": dict(e.columns),
            "kind": e.kind,
            "history": e.history,
        }

    sources = [
        {"name": s.name, "format": s.format, "landing": str(folder / s.name)}
        | {"entities": [entity(e) for e in s.entities]}
        for s in (SHOP, CASS, GRAPH)
    ]
    path = folder / "config" / "sources.yml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump({"sources": sources}, sort_keys=False))
    return load_config(path)


def rows_of(frame: DataFrame) -> list[tuple]:
    kept = sorted(c for c in frame.columns if c not in IGNORED)
    if "silver_version" in kept and "row_count" in kept:  # progress: the latest per table
        frame = frame.groupBy("table_name").agg({"silver_version": "max"})
        kept = sorted(frame.columns)
    return sorted(tuple(str(v) for v in r) for r in frame.select(*kept).collect())


def run_gold(lake: Path, config: Path, fault: str | None, batch: list | None) -> int:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    args = [
        sys.executable,
        "-m",
        "tests.gold.crash_run",
        "--lake",
        str(lake),
        "--config",
        str(config),
    ]
    if batch is not None:
        rows = lake.parent / f"rows-{len(list(lake.parent.glob('rows-*')))}.json"
        rows.write_text(json.dumps([list(r) for r in batch], default=str))
        args += ["--append", str(rows)]
    done = subprocess.run(
        args, cwd=PROJECT_ROOT, env=env, start_new_session=True, capture_output=True, text=True
    )
    assert done.returncode in (0, -9), done.stderr[-3000:]
    return done.returncode


def test_a_kill_between_any_two_writes_loses_and_doubles_nothing(
    spark: SparkSession, settings: Settings, tmp_path: Path
):
    config = write_config(tmp_path)
    lake = tmp_path / "crashed"
    assert run_gold(lake, config.path, None, BATCH_1) == 0
    killed = [run_gold(lake, config.path, CRASH_POINTS[0], BATCH_2)]
    killed += [run_gold(lake, config.path, point, None) for point in CRASH_POINTS[1:]]
    assert killed == [-9] * len(CRASH_POINTS), "every crash point was reached and killed"
    assert run_gold(lake, config.path, None, None) == 0

    reset_lake(spark, settings)
    create_change_log(spark)
    for batch in (BATCH_1, BATCH_2):
        append(spark, batch)
        apply_gold(spark, config, log=lambda _: None)
    warehouse = lake / "warehouse"
    for table, path in TABLES.items():
        expected = rows_of(spark.table(table))
        assert expected, f"the workload leaves rows in {table}"
        found = rows_of(spark.read.format("delta").load(str(warehouse / path)))
        assert found == expected, table
