"""TigerGraph through apply_gold: ops re-folded from history, cascades, implicit vertices."""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import SparkSession

from pyspark_jobs.config import Entity, Source
from pyspark_jobs.gold.apply import apply_gold
from pyspark_jobs.quality.definitions import load_gate
from pyspark_jobs.quality.frames import build_frame
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
        # Created implicitly by an edge: every attribute at TigerGraph's default.
        ("person2", 0, "[]", [1701569966031, 3, 0, 0], '{"uid":"person2"}'),
        ("person3", 0, "[]", [1701569970000, 5, 0, 1], '{"uid":"person3"}'),
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
        ("comp9", 9, datetime(1970, 1, 1), [1701569995000, 8, 0, 0]),
    ]
    assert rows(spark, "gold.person", PERSON_COLS) == [
        ("person1", 105, '["a"]', [1701548860000, 4, 0, 0], '{"uid":"person1"}'),
        ("person2", 0, "[]", [1701569966031, 3, 0, 0], '{"uid":"person2"}'),
        ("person4", 7, "[]", [1701569997000, 9, 0, 1], '{"uid":"person4"}'),
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


STATS = Entity(
    "Stats",
    "stats",
    ("uid",),
    {
        "uid": "string",
        "hi": "bigint",
        "lo": "bigint",
        "cap": "bigint",
        "all_ok": "boolean",
        "any_ok": "boolean",
        "label": "string",
        "seen": "timestamp",
        "m": "json",
    },
    kind="vertex",
    defaults={"cap": "100", "m": "{}"},
)
FOLLOWS = Entity("Follows", "follows", EDGE_KEY, {**EDGE_COLUMNS, "w": "double"}, kind="edge")
TG2 = Source("graph2", "tigergraph", (STATS, FOLLOWS), landing=None)
STATS_COLS = ["uid", "hi", "lo", "cap", "all_ok", "any_ok", "label", "seen", "m", "_seq"]


def stats(uid, seq, changes=None, op="patch"):
    return change(TG2, STATS, {"uid": uid}, op, [seq, 0, 0, 0], changes=changes)


def follows(f, t, seq):
    key = {
        "from_type": "Stats",
        "from_uid": f,
        "to_type": "Stats",
        "to_uid": t,
        "discriminator": "",
    }
    return change(
        TG2,
        FOLLOWS,
        key,
        "patch",
        [seq, 0, 0, 0],
        row={"hasreverseedge": False},
        changes={"w": ("Overwrite", "1.5", None)},
    )


def gold_gate_counts(spark: SparkSession, cfg) -> dict[str, tuple[int, int]]:
    """``table -> (deleted_keys_live, states_not_applied)`` of the gold reconciliation."""
    spec = next(s for s in load_gate("gold") if s.frame == "gold_reconciliation")
    frame = build_frame(spark, cfg, spec)
    return {r["table"]: (r["deleted_keys_live"], r["states_not_applied"]) for r in frame.collect()}


def test_attributes_start_at_defaults_and_recreated_vertices_pass_the_gate(
    spark: SparkSession, empty_lake
):
    cfg = config(TG2)
    create_change_log(spark)
    batch_1 = [
        # Ops on a new vertex apply to the defaults: Max(0, -5) = 0, Min(0, 7) = 0,
        # Min(declared 100, 7) = 7, And(false, true) = false, Or(false, true) = true.
        stats(
            "s1",
            1,
            {
                "hi": ("Max", "-5", None),
                "lo": ("Min", "7", None),
                "cap": ("Min", "7", None),
                "all_ok": ("And", "true", None),
                "any_ok": ("Or", "true", None),
                "label": ("Add", "x", None),
                "m": ("ReplaceOrAdd", '{"k":"v"}', None),
            },
        ),
        # Deleted, then re-created by an edge insert in the same batch.
        stats("s2", 10, {"hi": ("Overwrite", "9", None)}),
        stats("s2", 11, op="delete"),
        follows("s2", "s1", 12),
        # Deleted here, re-created by an edge and by `insert-only` in the next batch.
        stats("s3", 13, {"hi": ("Overwrite", "4", None)}),
        stats("s3", 14, op="delete"),
        stats("s4", 16, {"hi": ("Overwrite", "3", None)}),
        stats("s4", 17, op="delete"),
    ]
    append(spark, batch_1)
    apply_gold(spark, cfg, log=lambda _: None)
    epoch = datetime(1970, 1, 1)
    assert rows(spark, "gold.stats", STATS_COLS) == [
        ("s1", 0, 0, 7, False, True, "x", epoch, '{"k":"v"}', [1, 0, 0, 0]),
        ("s2", 0, 0, 100, False, False, "", epoch, "{}", [12, 0, 0, 0]),
    ]
    assert gold_gate_counts(spark, cfg) == {"gold.stats": (0, 0), "gold.follows": (0, 0)}

    append(spark, [follows("s3", "s1", 15), stats("s4", 18, {}, op="insert_if_absent")])
    apply_gold(spark, cfg, log=lambda _: None)
    assert rows(spark, "gold.stats", STATS_COLS) == [
        ("s1", 0, 0, 7, False, True, "x", epoch, '{"k":"v"}', [1, 0, 0, 0]),
        ("s2", 0, 0, 100, False, False, "", epoch, "{}", [12, 0, 0, 0]),
        ("s3", 0, 0, 100, False, False, "", epoch, "{}", [15, 0, 0, 0]),
        ("s4", 0, 0, 100, False, False, "", epoch, "{}", [18, 0, 0, 0]),
    ]
    assert rows(spark, "gold.follows", ["from_uid", "to_uid", "w"]) == [
        ("s2", "s1", 1.5),
        ("s3", "s1", 1.5),
    ]
    assert gold_gate_counts(spark, cfg) == {"gold.stats": (0, 0), "gold.follows": (0, 0)}
