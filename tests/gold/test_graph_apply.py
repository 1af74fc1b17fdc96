"""TigerGraph through apply_gold: ops re-folded from history, cascades, implicit vertices."""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import SparkSession

from pyspark_jobs.config import Entity, Source
from pyspark_jobs.gold.apply import apply_gold
from tests.gold.changelog import append, change, config, create_change_log, rows

EDGE_KEY = ("from_type", "from_uid", "to_type", "to_uid", "discriminator")
EDGE_COLUMNS = {k: "string" for k in EDGE_KEY}
COMPANY = Entity(
    "Company",
    "company",
    ("uid",),
    {"uid": "string", "cid": "bigint", "startDate": "timestamp"},
    kind="vertex",
)
PERSON = Entity(
    "Person",
    "person",
    ("uid",),
    {"uid": "string", "score": "bigint", "tags": "json"},
    kind="vertex",
)
CREATES = Entity(
    "Creates",
    "creates",
    EDGE_KEY,
    {**EDGE_COLUMNS, "attr_list_tuple": "json", "attr_map_tuple": "json"},
    kind="edge",
)
KNOWS = Entity("Knows", "knows", EDGE_KEY, {**EDGE_COLUMNS, "since": "bigint"}, kind="edge")
TG = Source("graph", "tigergraph", (COMPANY, PERSON, CREATES, KNOWS), landing=None)
CONFIG = config(TG)


def edge(entity, f, t, seq, changes, op="patch"):
    key = {
        "from_type": f[0],
        "from_uid": f[1],
        "to_type": t[0],
        "to_uid": t[1],
        "discriminator": "",
    }
    return change(TG, entity, key, op, seq, row={"hasreverseedge": True}, changes=changes)


def vertex(entity, uid, seq, changes=None, op="patch"):
    return change(TG, entity, {"uid": uid}, op, seq, changes=changes)


LIST_TUPLE = '["i: 2, u: 0, f: 3, d: 3, dt: 1222819200, b: 0, s: m2"]'
MAP_TUPLE = '{"2011-10-20":"i: 2, u: 0, f: 3, d: 3, dt: 1222819200, b: 0, s: m2"}'
BATCH_1 = [
    # The document's vertex example (mid 1|1701548849757|1|0).
    vertex(
        COMPANY,
        "comp1",
        [1701548849757, 1, 0, 0],
        {
            "cid": ("Overwrite", "2345", None),
            "startDate": ("Overwrite", "2001-01-01 08:00:00", None),
        },
    ),
    vertex(
        PERSON,
        "person1",
        [1701548850000, 2, 0, 0],
        {"score": ("Overwrite", "10", None), "tags": ("Add", '["a"]', None)},
    ),
    vertex(PERSON, "person1", [1701548860000, 4, 0, 0], {"score": ("Add", "5", None)}),
    # The document's edge example: its source vertex person2 does not exist yet.
    edge(
        CREATES,
        ("Person", "person2"),
        ("Company", "comp2"),
        [1701569966031, 3, 0, 0],
        {
            "attr_list_tuple": ("Add", LIST_TUPLE, None),
            "attr_map_tuple": ("ReplaceOrAdd", MAP_TUPLE, None),
        },
    ),
    # An undirected edge: origin and switched message.
    edge(
        KNOWS,
        ("Person", "person1"),
        ("Person", "person3"),
        [1701569970000, 5, 0, 0],
        {"since": ("Overwrite", "2020", None)},
    ),
    edge(
        KNOWS,
        ("Person", "person3"),
        ("Person", "person1"),
        [1701569970000, 5, 0, 1],
        {"since": ("Overwrite", "2020", None)},
    ),
]
LATE_OVERWRITE = vertex(
    PERSON, "person1", [1701548855000, 3, 0, 0], {"score": ("Overwrite", "100", None)}
)
BATCH_2 = [
    LATE_OVERWRITE,  # older than the Add already applied: lands before it
    vertex(PERSON, "person3", [1701569980000, 6, 0, 0], op="delete"),
    change(TG, COMPANY, {}, "truncate", [1701569990000, 7, 0, 0]),
    vertex(COMPANY, "comp9", [1701569995000, 8, 0, 0], {"cid": ("Overwrite", "9", None)}),
    vertex(
        PERSON,
        "person1",
        [1701569996000, 9, 0, 0],
        {"score": ("Overwrite", "0", None)},
        op="insert_if_absent",
    ),
    vertex(
        PERSON,
        "person4",
        [1701569997000, 9, 0, 1],
        {"score": ("Overwrite", "7", None)},
        op="insert_if_absent",
    ),
]

PERSON_COLS = ["uid", "score", "tags", "_seq", "_record_key"]
EDGE_COLS = [*EDGE_KEY, "_seq"]


def test_graph_ops_cascades_and_implicit_vertices(spark: SparkSession, empty_lake):
    create_change_log(spark)
    append(spark, BATCH_1)
    apply_gold(spark, CONFIG, log=lambda _: None)
    assert rows(spark, "gold.company", ["uid", "cid", "startDate", "_seq"]) == [
        ("comp1", 2345, datetime(2001, 1, 1, 8, 0), [1701548849757, 1, 0, 0]),
    ]
    assert rows(spark, "gold.person", PERSON_COLS) == [
        ("person1", 15, '["a"]', [1701548860000, 4, 0, 0], '{"uid":"person1"}'),
        ("person2", None, None, [1701569966031, 3, 0, 0], '{"uid":"person2"}'),  # implicit
        ("person3", None, None, [1701569970000, 5, 0, 1], '{"uid":"person3"}'),  # implicit
    ]
    assert rows(spark, "gold.creates", [*EDGE_COLS, "attr_list_tuple", "attr_map_tuple"]) == [
        (
            "Person",
            "person2",
            "Company",
            "comp2",
            "",
            [1701569966031, 3, 0, 0],
            LIST_TUPLE,
            MAP_TUPLE,
        ),
    ]
    assert rows(spark, "gold.knows", [*EDGE_COLS, "since"]) == [
        ("Person", "person1", "Person", "person3", "", [1701569970000, 5, 0, 0], 2020),
        ("Person", "person3", "Person", "person1", "", [1701569970000, 5, 0, 1], 2020),
    ]

    append(spark, BATCH_2)
    # A redelivered change that reached the log twice still counts once.
    append(spark, [BATCH_1[2]], dedupe=False)
    apply_gold(spark, CONFIG, log=lambda _: None)
    assert rows(spark, "gold.company", ["uid", "cid", "startDate", "_seq"]) == [
        ("comp9", 9, None, [1701569995000, 8, 0, 0]),
    ]
    assert rows(spark, "gold.person", PERSON_COLS) == [
        ("person1", 105, '["a"]', [1701548860000, 4, 0, 0], '{"uid":"person1"}'),
        ("person2", None, None, [1701569966031, 3, 0, 0], '{"uid":"person2"}'),
        ("person4", 7, None, [1701569997000, 9, 0, 1], '{"uid":"person4"}'),
    ]
    assert rows(spark, "gold.creates", EDGE_COLS) == []  # its target company was truncated
    assert rows(spark, "gold.knows", EDGE_COLS) == []  # person3 deleted: both directions go

    versions = {
        t: spark.sql(f"describe history gold.{t} limit 1").first()["version"]
        for t in ("company", "person", "creates", "knows")
    }
    apply_gold(spark, CONFIG, log=lambda _: None)  # a re-run applies nothing
    assert {
        t: spark.sql(f"describe history gold.{t} limit 1").first()["version"] for t in versions
    } == versions
