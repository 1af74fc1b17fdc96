"""`lakehouse gold --rebuild TABLE`: one table rebuilt from the change log ends identical to
its incremental result, for every fold family; after a declared type is fixed, a rebuild
merges the states that were rejected before; a key whose state is still rejected keeps
its last good state, and a rebuild cut short is finished from the table before it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pyspark.sql import SparkSession

from pyspark_jobs.config import Entity, Source
from pyspark_jobs.faults import FAULT_ENV, FAULT_MODE_ENV, InjectedFault
from pyspark_jobs.gold.apply import apply_gold
from pyspark_jobs.gold.rebuild import (
    apply_gold_finishing_rebuilds,
    rebuild_table,
    unfinished_rebuilds,
)
from pyspark_jobs.settings import Settings
from tests.conftest import reset_lake
from tests.gold.changelog import append, change, config, create_change_log

EDGE_KEY = ("from_type", "from_uid", "to_type", "to_uid", "discriminator")
USERS = Entity(
    "shop.users",
    "r_users",
    ("id",),
    {"id": "bigint", "name": "string", "n": "bigint"},
    history=True,
)
CUST = Entity("ks.cust", "r_cust", ("id",), {"id": "bigint", "a": "string", "b": "string"})
PERSON = Entity("Person", "r_person", ("uid",), {"uid": "string", "score": "bigint"}, kind="vertex")
KNOWS = Entity("Knows", "r_knows", EDGE_KEY, {k: "string" for k in EDGE_KEY}, kind="edge")
DOCS = Entity("Docs", "r_docs", ("entity",), {"entity": "string", "a": "string"}, kind="document")
SHOP = Source("r_shop", "debezium", (USERS,), landing=None)
CASS = Source("r_cass", "cassandra", (CUST,), landing=None)
GRAPH = Source("r_graph", "tigergraph", (PERSON, KNOWS), landing=None)
PATCHES = Source("r_docs", "debezium_patch", (DOCS,), landing=None)
CONFIG = config(SHOP, CASS, GRAPH, PATCHES)
IGNORED = {"_updated_at"}


def user(i, seq, name, n="1", op="upsert"):
    row = {"id": i, "name": name, "n": n} if op == "upsert" else None
    return change(SHOP, USERS, {"id": i}, op, [seq], row=row)


def cells(i, ts, **values):
    changes = {c: ("set", v, ts) for c, v in values.items()}
    return change(CASS, CUST, {"id": i}, "patch", [ts, 0, 0], changes=changes)


def knows(f, t, seq):
    key = {"from_type": "Person", "from_uid": f, "to_type": "Person", "to_uid": t}
    key["discriminator"] = ""
    return change(GRAPH, KNOWS, key, "patch", [seq, 0, 0, 0], row={"hasreverseedge": False})


BATCHES = [
    [
        user(1, 100, "ann"),
        user(2, 100, "bob"),
        user(3, 100, "cy", n="1.5"),  # not a bigint: rejected until the type is fixed
        cells(1, 1000, a="x", b="y"),
        cells(2, 1000, a="p"),
        change(
            GRAPH,
            PERSON,
            {"uid": "p1"},
            "patch",
            [10, 0, 0, 0],
            changes={"score": ("Add", "5", None)},
        ),
        knows("p1", "p2", 12),
        change(PATCHES, DOCS, {"entity": "d1"}, "patch", [1], changes={"a": ("add", "v", None)}),
    ],
    [
        user(1, 200, "ann2"),
        user(1, 150, "ann-between"),
        user(2, 200, "", op="delete"),
        cells(1, 2000, a="x2"),
        change(CASS, CUST, {"id": 2}, "delete", [2000, 0, 1]),
        change(
            GRAPH,
            PERSON,
            {"uid": "p1"},
            "patch",
            [20, 0, 0, 0],
            changes={"score": ("Add", "3", None)},
        ),
        change(GRAPH, PERSON, {"uid": "p1"}, "delete", [30, 0, 0, 0]),
        knows("p1", "p3", 40),  # p1 back as the edge's source, from its defaults
        change(PATCHES, DOCS, {"entity": "d1"}, "delete", [2]),
        change(PATCHES, DOCS, {"entity": "d1"}, "patch", [3], changes={"a": ("add", "w", None)}),
    ],
]
TABLES = ["r_users", "r_cust", "r_person", "r_knows", "r_docs"]


def snapshot(spark: SparkSession, table: str) -> list[tuple]:
    frame = spark.table(table)
    kept = sorted(c for c in frame.columns if c not in IGNORED)
    return sorted(tuple(str(v) for v in r) for r in frame.select(*kept).collect())


def test_rebuild_equals_incremental_and_repairs_after_a_type_fix(spark: SparkSession, empty_lake):
    create_change_log(spark)
    for batch in BATCHES:
        append(spark, batch)
        apply_gold(spark, CONFIG, log=lambda _: None)
    incremental = {t: snapshot(spark, f"gold.{t}") for t in [*TABLES, "r_users_history"]}
    assert all(incremental.values()), "the workload leaves rows in every table"
    assert spark.table("lakehouse.gold_rejects").where("table_name = 'r_users'").count() == 1

    for table in TABLES:
        rebuild_table(spark, CONFIG, table, log=lambda _: None)
        assert snapshot(spark, f"gold.{table}") == incremental[table], table
    assert snapshot(spark, "gold.r_users_history") == incremental["r_users_history"]
    apply_gold(spark, CONFIG, log=lambda _: None)  # nothing new: a rebuilt table is current
    assert snapshot(spark, "gold.r_users") == incremental["r_users"]

    # The operator's path for a rejected state: fix the declared type, rebuild the table.
    fixed = replace(USERS, columns={**USERS.columns, "n": "double"})
    rebuild_table(
        spark,
        config(replace(SHOP, entities=(fixed,)), CASS, GRAPH, PATCHES),
        "gold.r_users",
        log=lambda _: None,
    )
    assert sorted(
        tuple(r) for r in spark.table("gold.r_users").select("id", "name", "n").collect()
    ) == [(1, "ann2", 1.0), (3, "cy", 1.5)]


# Drift: a column that no longer casts to its declared type. The incremental runs keep
# each such key's last good state; a rebuild must end the same.
DRIFT_USERS = Entity(
    "shop.users", "d_users", ("id",), {"id": "bigint", "name": "string", "n": "bigint"}
)
DRIFT_CUST = Entity("ks.cust", "d_cust", ("id",), {"id": "bigint", "a": "string", "n": "bigint"})
# Soft deletes: a rebuild folds each key's whole life at once, the runs kept deleted rows.
DRIFT_ACCOUNTS = Entity(
    "shop.accounts", "d_accounts", ("id",), {"id": "bigint", "n": "bigint"}, soft_delete=True
)
DRIFT_SHOP = Source("d_shop", "debezium", (DRIFT_USERS, DRIFT_ACCOUNTS), landing=None)
DRIFT_CASS = Source("d_cass", "cassandra", (DRIFT_CUST,), landing=None)
DRIFT = config(DRIFT_SHOP, DRIFT_CASS)
DRIFT_TABLES = ["d_users", "d_cust", "d_accounts"]


def drift_user(i: int, seq: int, name: str, n: str) -> tuple:
    return change(
        DRIFT_SHOP, DRIFT_USERS, {"id": i}, "upsert", [seq], row={"id": i, "name": name, "n": n}
    )


def drift_account(i: int, seq: int, n: str | None = None) -> tuple:
    row = None if n is None else {"id": i, "n": n}
    op = "delete" if n is None else "upsert"
    return change(DRIFT_SHOP, DRIFT_ACCOUNTS, {"id": i}, op, [seq], row=row)


def drift_cells(i: int, ts: int, **values: str) -> tuple:
    changes = {c: ("set", v, ts) for c, v in values.items()}
    return change(DRIFT_CASS, DRIFT_CUST, {"id": i}, "patch", [ts, 0, 0], changes=changes)


DRIFT_BATCHES = [
    [
        drift_user(1, 100, "ann", "1"),
        drift_user(2, 100, "bob", "2"),
        drift_cells(1, 1000, a="x", n="1"),
        *(drift_account(i, 100, str(i)) for i in (1, 2, 3)),
    ],
    # n is text now: these states are rejected, the keys keep their last good state
    [
        drift_user(1, 200, "ann", "forty"),
        drift_user(2, 200, "bob2", "3"),
        drift_cells(1, 2000, n="x"),
        drift_account(1, 200),
        drift_account(2, 200, "x"),
    ],
    # a later cell applies on top of the kept state, as Cassandra would
    [
        drift_cells(1, 3000, a="later"),
        drift_account(3, 300),
        # back after its delete, but rejected: it stays deleted
        drift_account(1, 300, "y"),
        # inserted and deleted in one run: never a row
        drift_account(4, 300, "4"),
        drift_account(4, 301),
    ],
]


@pytest.fixture(scope="module")
def drifted(spark: SparkSession, settings: Settings) -> dict[str, list[tuple]]:
    """The drift batches applied incrementally; each test leaves gold as it found it."""
    reset_lake(spark, settings)
    create_change_log(spark)
    for batch in DRIFT_BATCHES:
        append(spark, batch)
        apply_gold(spark, DRIFT, log=lambda _: None)
    incremental = {t: snapshot(spark, f"gold.{t}") for t in DRIFT_TABLES}
    users = spark.table("gold.d_users").select("id", "name", "n").collect()
    assert sorted(tuple(r) for r in users) == [(1, "ann", 1), (2, "bob2", 3)]
    cust = spark.table("gold.d_cust").select("id", "a", "n").collect()
    assert [tuple(r) for r in cust] == [(1, "later", 1)]
    accounts = spark.table("gold.d_accounts").select("id", "n", "_deleted").collect()
    assert sorted(tuple(r) for r in accounts) == [(1, 1, True), (2, 2, False), (3, 3, True)]
    return incremental


def test_a_rebuild_keeps_a_rejected_keys_last_good_state_as_the_incremental_runs_do(
    spark: SparkSession, drifted: dict[str, list[tuple]]
):
    incremental = drifted
    for table in DRIFT_TABLES:
        rebuild_table(spark, DRIFT, table, log=lambda _: None)
        assert snapshot(spark, f"gold.{table}") == incremental[table], table
    assert unfinished_rebuilds(spark) == {}


def test_a_rebuild_cut_short_is_finished_from_the_table_before_it(
    spark: SparkSession, drifted: dict[str, list[tuple]], monkeypatch: pytest.MonkeyPatch
):
    """Killed after the table was emptied, then the next gold step; killed after the
    MERGE, then the rebuild again: both end as the uninterrupted rebuild."""
    incremental = drifted
    monkeypatch.setenv(FAULT_MODE_ENV, "raise")
    for table, point, then in (
        ("d_users", "gold:rebuild:replaced:d_users", "gold step"),
        ("d_cust", "gold:rebuild:applied:d_cust", "rebuild"),
        ("d_accounts", "gold:rebuild:replaced:d_accounts", "rebuild"),
    ):
        monkeypatch.setenv(FAULT_ENV, point)
        with pytest.raises(InjectedFault):
            rebuild_table(spark, DRIFT, table, log=lambda _: None)
        monkeypatch.delenv(FAULT_ENV)
        assert set(unfinished_rebuilds(spark)) == {table}
        logged: list[str] = []
        if then == "gold step":
            apply_gold_finishing_rebuilds(spark, DRIFT, log=logged.append)
            assert f"gold gold.{table}: finishing a rebuild that was cut short" in logged
        else:
            rebuild_table(spark, DRIFT, table, log=logged.append)
        assert any("rebuilding again, from version" in line for line in logged), logged
        assert snapshot(spark, f"gold.{table}") == incremental[table], table
    assert unfinished_rebuilds(spark) == {}
