"""A gold apply stopped between any two of its commits loses nothing and doubles nothing.

`lakehouse.gold_pending` makes every write after the fold repeatable: this stops a run at
each crash point in turn (`LAKEHOUSE_FAULT`, in raise mode: the run stops in this process
with exactly the commits a kill there leaves) — the next run resumes the staged run and is
itself stopped at the next point — then compares every table with an uninterrupted apply
of the same changes: gold rows, SCD2 history (no version lost), rejects (none recorded
twice), tombstones and progress. The stopped runs' first apply also finds, in each table's
folder, what a kill inside its ``create table`` leaves. The crash drills (`tests/drills`)
kill real processes.
"""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.config import Entity, Source
from pyspark_jobs.faults import FAULT_ENV, FAULT_MODE_ENV, InjectedFault
from pyspark_jobs.gold.apply import apply_gold
from pyspark_jobs.settings import Settings
from tests.conftest import reset_lake
from tests.gold.changelog import append, change, config, create_change_log
from tests.support.killed_creation import leave_killed_creation

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
# Every write of a run; the resumed run passes them all again. The writes after staging
# run side by side: a stop at one lets the others in flight commit (a kill may cut them
# anywhere: the crash drills, tests/drills).
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
TABLES = [
    "gold.c_users",
    "gold.c_users_history",
    "gold.c_cust",
    "gold.c_person",
    "gold.c_person_history",
    "gold.c_knows",
    "lakehouse.gold_rejects",
    "lakehouse.gold_tombstones",
    "lakehouse.gold_progress",
]
CONFIG = config(SHOP, CASS, GRAPH)
CREATED_TABLES = [*TABLES, "lakehouse.gold_pending"]


def rows_of(frame: DataFrame) -> list[tuple]:
    kept = sorted(c for c in frame.columns if c not in IGNORED)
    if "silver_version" in kept and "row_count" in kept:
        # Progress: every row of the latest version per table, row count included (a
        # resumed run once carried forward the count from before the crash).
        latest = frame.groupBy("table_name").agg(F.max("silver_version").alias("silver_version"))
        frame = frame.join(latest, ["table_name", "silver_version"]).drop("applied_at").distinct()
    return sorted(tuple(str(v) for v in r) for r in frame.select(*kept).collect())


def snapshot(spark: SparkSession) -> dict[str, list[tuple]]:
    return {table: rows_of(spark.table(table)) for table in TABLES}


def test_a_stop_between_any_two_writes_loses_and_doubles_nothing(
    spark: SparkSession, settings: Settings, monkeypatch: pytest.MonkeyPatch
):
    quiet = {"log": lambda _: None}
    reset_lake(spark, settings)
    create_change_log(spark)
    for batch in (BATCH_1, BATCH_2):
        append(spark, batch)
        apply_gold(spark, CONFIG, **quiet)
    expected = snapshot(spark)
    assert all(expected.values()), "the workload leaves rows in every table"

    reset_lake(spark, settings)
    create_change_log(spark)
    # A kill inside each table's `create table` (before the catalog registered it): the
    # first apply creates every table again over what the kill left.
    for table in CREATED_TABLES:
        leave_killed_creation(spark, table)
    append(spark, BATCH_1)
    apply_gold(spark, CONFIG, **quiet)
    append(spark, BATCH_2)
    monkeypatch.setenv(FAULT_MODE_ENV, "raise")
    stopped = []
    for point in CRASH_POINTS:
        monkeypatch.setenv(FAULT_ENV, point)
        with pytest.raises(InjectedFault) as fault:
            apply_gold(spark, CONFIG, **quiet)
        stopped.append(str(fault.value))
    assert stopped == [f"stopped at crash point {p}" for p in CRASH_POINTS]
    monkeypatch.delenv(FAULT_ENV)
    apply_gold(spark, CONFIG, **quiet)

    assert snapshot(spark) == expected
