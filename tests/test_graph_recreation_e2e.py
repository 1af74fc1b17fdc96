"""TigerGraph vertices deleted and re-created without a message of their own (as an edge's
source, or by TigerGraph's `insert-only` for a directed edge's target), in one batch and
across batches: `lakehouse run` passes every gate and gold holds what TigerGraph holds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

from pyspark_jobs.config import load_config
from pyspark_jobs.settings import Settings
from tests.conftest import reset_lake
from tests.quality.support import latest_run, run_logged
from tests.silver.landing import record, write_lines

pytestmark = pytest.mark.slow

TOPIC = "tg.graph"
SOURCE = {
    "name": "graph",
    "format": "tigergraph",
    "entities": [
        {
            "name": "Person",
            "table": "g_person",
            "kind": "vertex",
            "key": ["uid"],
            "columns": {"uid": "string", "score": "bigint", "tags": "json"},
        },
        {
            "name": "Company",
            "table": "g_company",
            "kind": "vertex",
            "key": ["uid"],
            "columns": {"uid": "string", "cid": "bigint"},
        },
        {
            "name": "WorksAt",
            "table": "g_works_at",
            "kind": "edge",
            "key": ["from_type", "from_uid", "to_type", "to_uid", "discriminator"],
            "columns": {
                "from_type": "string",
                "from_uid": "string",
                "to_type": "string",
                "to_uid": "string",
                "discriminator": "string",
                "since": "bigint",
            },
        },
        {
            "name": "Knows",
            "table": "g_knows",
            "kind": "edge",
            "key": ["from_type", "from_uid", "to_type", "to_uid", "discriminator"],
            "columns": {
                "from_type": "string",
                "from_uid": "string",
                "to_type": "string",
                "to_uid": "string",
                "discriminator": "string",
            },
        },
    ],
}


def vertex(mid: str, typename: str, uid: str, operator: str = "insert", content=None) -> dict:
    ts = int(mid.split("|")[1])
    return {
        "mid": mid,
        "operator": operator,
        "timestamp": ts,
        "type": "vertex",
        "typename": typename,
        "uid": uid,
        "content": content or {},
    }


def edge(mid: str, typename: str, source: tuple, target: tuple, content=None) -> dict:
    ts = int(mid.split("|")[1])
    return {
        "mid": mid,
        "operator": "insert",
        "timestamp": ts,
        "type": "edge",
        "typename": typename,
        "from": {"type": source[0], "uid": source[1]},
        "to": {"type": target[0], "uid": target[1]},
        "content": content or {},
    }


BATCH_1 = [
    vertex("1|1000|1|0", "Person", "p1", content={"score": {"op": "Overwrite", "value": 5}}),
    vertex("1|1001|2|0", "Person", "p1", "delete"),
    # p1 comes back as the edge's source; c1 by the insert-only TigerGraph sends for the
    # target of a directed edge.
    edge(
        "1|1002|3|0",
        "WorksAt",
        ("Person", "p1"),
        ("Company", "c1"),
        {"since": {"op": "Overwrite", "value": 2020}},
    ),
    vertex("1|1002|3|1", "Company", "c1", "insert-only"),
    # Max on a new vertex applies to the default: Max(0, -3) = 0.
    vertex("1|1003|4|0", "Company", "c2", content={"cid": {"op": "Max", "value": -3}}),
    vertex("1|1004|5|0", "Person", "p2", content={"score": {"op": "Add", "value": 2}}),
    vertex("1|1005|6|0", "Company", "c1", "delete"),  # its WorksAt edge goes with it
]
BATCH_2 = [
    edge("1|2000|7|0", "WorksAt", ("Person", "p2"), ("Company", "c1")),
    vertex("1|2000|7|1", "Company", "c1", "insert-only"),  # c1 back, from its defaults
    vertex("1|2001|8|0", "Person", "p2", "delete"),  # its WorksAt edge goes with it
    # An undirected edge: origin and switched message re-create p2 and create p3.
    edge("1|2002|9|0|0", "Knows", ("Person", "p2"), ("Person", "p3")),
    edge("1|2002|9|0|1", "Knows", ("Person", "p3"), ("Person", "p2")),
]


def land(folder: Path, name: str, messages: list[dict], first_offset: int) -> None:
    write_lines(
        folder / name,
        [record(TOPIC, first_offset + i, None, m, m["timestamp"]) for i, m in enumerate(messages)],
    )


def rows(spark: SparkSession, table: str, columns: list[str]) -> list[tuple]:
    return sorted(tuple(r) for r in spark.table(table).select(*columns).collect())


def test_recreated_vertices_pass_every_gate(
    spark: SparkSession, settings: Settings, tmp_path: Path
):
    reset_lake(spark, settings)
    landing = tmp_path / "landing"
    land(landing, "1.jsonl", BATCH_1, 0)
    path = tmp_path / "config" / "sources.yml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump({"sources": [{**SOURCE, "landing": str(landing)}]}))
    config = load_config(path)

    code, output = run_logged(spark, settings, config)
    assert code == 0, output
    assert all(g["success"] for g in latest_run(settings)["gates"].values())
    assert rows(spark, "gold.g_person", ["uid", "score", "tags"]) == [
        ("p1", 0, "[]"),  # re-created by the edge: defaults, not its first life's 5
        ("p2", 2, "[]"),
    ]
    assert rows(spark, "gold.g_company", ["uid", "cid"]) == [("c2", 0)]
    assert rows(spark, "gold.g_works_at", ["from_uid", "to_uid"]) == []

    land(landing, "2.jsonl", BATCH_2, len(BATCH_1))
    code, output = run_logged(spark, settings, config)
    assert code == 0, output
    assert all(g["success"] for g in latest_run(settings)["gates"].values())
    assert rows(spark, "gold.g_person", ["uid", "score", "tags"]) == [
        ("p1", 0, "[]"),
        ("p2", 0, "[]"),  # deleted, then back as the Knows edge's source
        ("p3", 0, "[]"),
    ]
    assert rows(spark, "gold.g_company", ["uid", "cid"]) == [("c1", 0), ("c2", 0)]
    assert rows(spark, "gold.g_works_at", ["from_uid", "to_uid"]) == []
    assert rows(spark, "gold.g_knows", ["from_uid", "to_uid"]) == [("p2", "p3"), ("p3", "p2")]
