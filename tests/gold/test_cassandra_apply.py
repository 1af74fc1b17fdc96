"""Cassandra cells through apply_gold: per-cell LWW, row deletes at T, all-key tables."""

from __future__ import annotations

from pyspark.sql import SparkSession

from pyspark_jobs.config import Entity, Source
from pyspark_jobs.gold.apply import apply_gold
from tests.gold.changelog import append, change, config, create_change_log, rows

MARKER = "__row_marker__"
PEOPLE = Entity(
    "ks.people",
    "people",
    ("id",),
    {"id": "bigint", "name": "string", "email": "string", "phone": "string"},
)
PAIRS = Entity("ks.pairs", "pairs", ("a", "b"), {"a": "bigint", "b": "string"})
CASS = Source("cass", "cassandra", (PEOPLE, PAIRS), landing=None)


def insert(entity, key, ts, **cells):
    changes = {MARKER: ("set", None, ts), **{c: ("set", v, ts) for c, v in cells.items()}}
    return change(CASS, entity, key, "patch", [ts, 0, ts % 1000], changes=changes)


def update(entity, key, ts, **cells):
    changes = {c: ("delete", None, ts) if v is None else ("set", v, ts) for c, v in cells.items()}
    return change(CASS, entity, key, "patch", [ts, 1, ts % 1000], changes=changes)


def delete(entity, key, ts):
    return change(CASS, entity, key, "delete", [ts, 2, ts % 1000])


def test_cells_resolve_by_write_time_across_batches(spark: SparkSession, empty_lake):
    create_change_log(spark)
    append(
        spark,
        [
            insert(PEOPLE, {"id": 1}, 100, name="a", email="a@"),
            insert(PEOPLE, {"id": 2}, 100, name="b", email="b@"),
            update(PEOPLE, {"id": 2}, 300, email="b-new@"),
            insert(PAIRS, {"a": 1, "b": "x"}, 100),
            insert(PAIRS, {"a": 2, "b": "y"}, 100),
            # A key whose only news is a row delete: it has no cells, but keeps a tombstone.
            delete(PEOPLE, {"id": 3}, 500),
        ],
    )
    apply_gold(spark, config(CASS), log=lambda _: None)
    append(
        spark,
        [
            # A late older write loses to the newer cell but sets the cell never written since.
            update(PEOPLE, {"id": 1}, 50, name="old", phone="p"),
            # A row delete at 200 hides the cells written at or before 200, not the one at 300.
            delete(PEOPLE, {"id": 2}, 200),
            delete(PAIRS, {"a": 1, "b": "x"}, 200),
            delete(PAIRS, {"a": 2, "b": "y"}, 50),  # older than the insert: changes nothing
            # Writes older than key 3's delete, arriving after it: they must not resurrect it.
            insert(PEOPLE, {"id": 3}, 400, name="late"),
            update(PEOPLE, {"id": 3}, 450, email="late@"),
        ],
    )
    apply_gold(spark, config(CASS), log=lambda _: None)
    assert rows(spark, "gold.people", ["id", "name", "email", "phone", "_seq", "_cell_ts"]) == [
        (1, "a", "a@", "p", [100, 0, 100], {MARKER: 100, "name": 100, "email": 100, "phone": 50}),
        (2, None, "b-new@", None, [300, 1, 300], {MARKER: 100, "name": 100, "email": 300}),
    ]
    assert rows(spark, "gold.pairs", ["a", "b", "_seq", "_cell_ts"]) == [
        (2, "y", [100, 0, 100], {MARKER: 100}),
    ]
    # Deleting the last live cell of key 2 (a row now kept alive only by that cell).
    version = spark.sql("describe history gold.people limit 1").first()["version"]
    apply_gold(spark, config(CASS), log=lambda _: None)
    assert spark.sql("describe history gold.people limit 1").first()["version"] == version
    append(spark, [update(PEOPLE, {"id": 2}, 400, email=None)])
    apply_gold(spark, config(CASS), log=lambda _: None)
    assert rows(spark, "gold.people", ["id"]) == [(1,)]
