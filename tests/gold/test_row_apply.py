"""Full-row formats through apply_gold: ordering, tombstones, truncates, re-runs, options."""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import SparkSession

from pyspark_jobs.config import Entity, Source
from pyspark_jobs.gold.apply import apply_gold
from tests.gold.changelog import append, change, config, create_change_log, rows

ITEMS = Entity("ITEMS", "items", ("id",), {"id": "bigint", "name": "string"})
DB2 = Source("erp", "db2", (ITEMS,), landing=None)


def up(key: int, seq: int, name: str) -> tuple:
    return change(DB2, ITEMS, {"id": key}, "upsert", [seq], row={"id": key, "name": name})


def delete(key: int, seq: int) -> tuple:
    return change(DB2, ITEMS, {"id": key}, "delete", [seq])


def test_deletes_truncates_and_late_changes_never_resurrect(spark: SparkSession, empty_lake):
    create_change_log(spark)
    cfg = config(DB2)
    # Key 1: insert, delete, late older insert, all in one batch.
    # Key 2: insert and delete now, the late older insert in the next batch.
    append(
        spark,
        [
            up(1, 1, "a"),
            delete(1, 3),
            up(1, 2, "late"),
            up(2, 1, "b"),
            delete(2, 3),
            up(3, 1, "c"),
            up(5, 5, "e"),
        ],
    )
    apply_gold(spark, cfg, log=lambda _: None)
    assert rows(spark, "gold.items", ["id", "name", "_seq"]) == [(3, "c", [1]), (5, "e", [5])]

    append(spark, [up(2, 2, "late"), up(3, 2, "c2")])
    append(spark, [up(3, 2, "c2")], dedupe=False)  # a redelivery that reached the log
    apply_gold(spark, cfg, log=lambda _: None)
    assert rows(spark, "gold.items", ["id", "name", "_seq"]) == [(3, "c2", [2]), (5, "e", [5])]
    version = spark.sql("describe history gold.items limit 1").first()["version"]
    apply_gold(spark, cfg, log=lambda _: None)  # a re-run writes nothing
    assert spark.sql("describe history gold.items limit 1").first()["version"] == version

    # A truncate at 10 removes every row written before it, not the one written after.
    append(spark, [change(DB2, ITEMS, {}, "truncate", [10]), up(4, 11, "d")])
    apply_gold(spark, cfg, log=lambda _: None)
    assert rows(spark, "gold.items", ["id", "name", "_seq"]) == [(4, "d", [11])]
    # Late changes older than the truncate (even of never-seen keys) stay out.
    append(spark, [up(6, 9, "late"), up(5, 12, "e2"), up(3, 7, "late")])
    apply_gold(spark, cfg, log=lambda _: None)
    assert rows(spark, "gold.items", ["id", "name", "_seq"]) == [(4, "d", [11]), (5, "e2", [12])]
    assert rows(spark, "lakehouse.gold_tombstones", ["table_name", "record_key", "seq"]) == [
        ("items", '{"id":"1"}', [3]),
        ("items", '{"id":"2"}', [3]),
        ("items", '{"id":"3"}', [10]),
        ("items", '{"id":"5"}', [10]),  # kept: the later upsert of 5 outranks it anyway
        ("items", "{}", [10]),  # the truncate's table-wide tombstone
    ]


USERS = Entity(
    "USERS",
    "users",
    ("id",),
    {"id": "bigint", "name": "string", "n": "bigint"},
    soft_delete=True,
    history=True,
)
USERS_V2 = Entity(
    "USERS",
    "users",
    ("id",),
    {"id": "bigint", "name": "string", "n": "bigint", "email": "string"},
    soft_delete=True,
    history=True,
)


def test_soft_delete_history_rejects_and_new_columns(spark: SparkSession, empty_lake):
    src = Source("crm", "goldengate", (USERS,), landing=None)
    create_change_log(spark)
    first = [
        change(src, USERS, {"id": 1}, "upsert", [1000], row={"id": 1, "name": "a", "n": "1"}),
        change(src, USERS, {"id": 2}, "upsert", [1000], row={"id": 2, "name": "b", "n": "abc"}),
    ]
    append(spark, first)
    apply_gold(spark, config(src), log=lambda _: None)
    second = [
        change(src, USERS, {"id": 1}, "upsert", [2000], row={"id": 1, "name": "a", "n": "2"}),
        change(src, USERS, {"id": 2}, "delete", [2000]),
    ]
    append(spark, second)
    apply_gold(spark, config(src), log=lambda _: None)
    # A late older upsert of the soft-deleted key does not revive it.
    append(
        spark,
        [change(src, USERS, {"id": 2}, "upsert", [1500], row={"id": 2, "name": "x", "n": "5"})],
    )
    apply_gold(spark, config(src), log=lambda _: None)
    t1, t2 = datetime(1970, 1, 1, 0, 0, 1), datetime(1970, 1, 1, 0, 0, 2)
    t15 = datetime(1970, 1, 1, 0, 0, 1, 500000)
    # Key 2's first state does not cast (n = "abc"): diverted, never merged; its delete
    # then finds no row to flag.
    assert rows(
        spark, "gold.users", ["id", "name", "n", "_seq", "_change_id", "_deleted", "_deleted_at"]
    ) == [
        (1, "a", 2, [2000], second[0][0], False, None),
    ]
    # History is built from the changes: every state a key went through, in seq order,
    # the late one (1500) in its place; the version that does not cast is diverted too.
    assert rows(
        spark,
        "gold.users_history",
        ["id", "name", "n", "_seq", "valid_from", "valid_to", "is_current"],
    ) == [
        (1, "a", 1, [1000], t1, t2, False),
        (1, "a", 2, [2000], t2, None, True),
        (2, "x", 5, [1500], t15, t2, False),
    ]
    assert rows(
        spark, "lakehouse.gold_rejects", ["table_name", "record_key", "reason", "change_id"]
    ) == [
        ("users", '{"id":"2"}', 'column n is not a bigint: "abc"', first[1][0]),
        ("users_history", '{"id":"2"}', 'column n is not a bigint: "abc"', first[1][0]),
    ]

    # A newly declared column is added to the existing tables and filled from then on.
    src2 = Source("crm", "goldengate", (USERS_V2,), landing=None)
    append(
        spark,
        [
            change(
                src2,
                USERS_V2,
                {"id": 1},
                "upsert",
                [3000],
                row={"id": 1, "name": "a", "n": "2", "email": "a@x"},
            )
        ],
    )
    apply_gold(spark, config(src2), log=lambda _: None)
    assert rows(spark, "gold.users", ["id", "name", "n", "email", "_deleted"]) == [
        (1, "a", 2, "a@x", False),
    ]
    assert "email" in spark.table("gold.users_history").columns
