"""Property: random TigerGraph vertex and edge messages, delivered out of order,
duplicated and spread over two runs of apply_gold, leave the vertex and edge tables
equal to a pure-Python replay of the same messages in ``mid`` order.

The replay is TigerGraph's own behaviour, one message at a time over the whole graph: a
vertex starts at its attribute defaults; a vertex delete deletes every edge touching it;
an edge insert creates its missing source vertex with defaults. Gold folds each key from
its own history instead (with cascades and implicit vertices as derived events, and only
the change-log rows the affected keys need), so the two must agree.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.config import Entity, Source
from pyspark_jobs.gold.apply import apply_gold
from tests.conftest import reset_lake
from tests.gold.changelog import append, change, config, create_change_log

EDGE_KEY = ("from_type", "from_uid", "to_type", "to_uid", "discriminator")
VERTS = Entity("V", "gp_verts", ("uid",), {"uid": "string", "n": "bigint"}, kind="vertex")
EDGES = Entity("E", "gp_edges", EDGE_KEY, {k: "string" for k in EDGE_KEY}, kind="edge")
SOURCE = Source("gp_tg", "tigergraph", (VERTS, EDGES), landing=None)
CONFIG = config(SOURCE)
BATCHES = 2
_examples = itertools.count()

uids = st.sampled_from(["a", "b", "c", "d"])
vertex_message = st.tuples(
    st.just("vertex"),
    uids,
    st.sampled_from(["patch", "patch", "insert_if_absent", "delete"]),
    st.sampled_from(["Overwrite", "Add", "Max", "Min"]),
    st.integers(-5, 5),
)
edge_message = st.tuples(st.just("edge"), uids, uids, st.sampled_from(["patch", "patch", "delete"]))
OPS = {
    "Overwrite": lambda old, v: v,
    "Add": lambda old, v: old + v,
    "Max": max,
    "Min": min,
}


def replay(messages: list[tuple]) -> tuple[dict[str, int], set[tuple[str, str]]]:
    """TigerGraph's graph after the messages, applied one by one in order."""
    vertices: dict[str, int] = {}
    edges: set[tuple[str, str]] = set()
    for message in messages:
        if message[0] == "vertex":
            _, uid, kind, op, value = message
            if kind == "delete":
                vertices.pop(uid, None)
                edges = {e for e in edges if uid not in e}
            elif kind == "patch" or uid not in vertices:
                vertices[uid] = OPS[op](vertices.get(uid, 0), value)
        else:
            _, source, target, kind = message
            if kind == "delete":
                edges.discard((source, target))
            else:
                edges.add((source, target))
                vertices.setdefault(source, 0)
    return vertices, edges


def as_change(message: tuple, prefix: str, seq: int) -> tuple:
    mid = [seq, 0, 0, 0]
    if message[0] == "vertex":
        _, uid, kind, op, value = message
        changes = None if kind == "delete" else {"n": (op, str(value), None)}
        return change(SOURCE, VERTS, {"uid": prefix + uid}, kind, mid, changes=changes)
    _, source, target, kind = message
    key = {
        "from_type": "V",
        "from_uid": prefix + source,
        "to_type": "V",
        "to_uid": prefix + target,
        "discriminator": "",
    }
    return change(SOURCE, EDGES, key, kind, mid, row={"hasreverseedge": False})


@pytest.fixture(scope="module")
def lake(spark: SparkSession, settings):
    reset_lake(spark, settings)
    create_change_log(spark)


# No shrinking (each example runs the job twice); examples are few and carry many messages.
@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
)
@given(
    messages=st.lists(st.one_of(vertex_message, edge_message), min_size=6, max_size=14).flatmap(
        lambda ms: st.tuples(
            st.just(ms),
            st.permutations(list(range(1, len(ms) + 1))),
            st.lists(st.integers(0, BATCHES - 1), min_size=len(ms), max_size=len(ms)),
            st.lists(
                st.one_of(st.none(), st.integers(0, BATCHES - 1)),
                min_size=len(ms),
                max_size=len(ms),
            ),
        )
    )
)
# A late vertex delete re-folds an edge whose other end was deleted later: the edge's
# history needs that end's delete too, though the new message never names it.
@example(
    messages=(
        [
            ("edge", "a", "b", "patch"),
            ("vertex", "b", "delete", "Add", 0),
            ("vertex", "a", "delete", "Add", 0),
        ],
        [5, 10, 3],
        [0, 0, 1],
        [None, None, None],
    )
)
def test_graph_equals_a_replay_of_the_messages(spark: SparkSession, lake, messages):
    prefix = f"{next(_examples)}-"
    ms, seqs, batch_of, again = messages
    batches: list[list[tuple]] = [[] for _ in range(BATCHES)]
    for message, seq, batch, redelivery in zip(ms, seqs, batch_of, again, strict=True):
        batches[batch].append(as_change(message, prefix, seq))
        if redelivery is not None:
            batches[redelivery].append(as_change(message, prefix, seq))
    for batch in batches:
        if batch:
            append(spark, batch, dedupe=False)
            apply_gold(spark, CONFIG, log=lambda _: None)

    in_order = [m for _, m in sorted(zip(seqs, ms, strict=True), key=lambda x: x[0])]
    vertices, edges = replay(in_order)
    mine = F.col("uid").startswith(prefix)
    found_vertices = {
        r["uid"][len(prefix) :]: r["n"]
        for r in spark.table("gold.gp_verts").where(mine).select("uid", "n").collect()
    }
    found_edges = {
        (r["from_uid"][len(prefix) :], r["to_uid"][len(prefix) :])
        for r in spark.table("gold.gp_edges")
        .where(F.col("from_uid").startswith(prefix))
        .select("from_uid", "to_uid")
        .collect()
    }
    assert found_vertices == vertices
    assert found_edges == edges
