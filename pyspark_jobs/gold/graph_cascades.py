"""What TigerGraph does to a graph without sending a message, as extra events.

TigerGraph sends no CDC message when a vertex delete (or a vertex-type delete) removes
the edges touching it, nor when an edge insert creates its missing source vertex. Gold
adds these as events derived from the message that caused them (same ``seq`` and
``change_id``), so the ordered fold of each key sees them in place:

- an edge table gets a ``delete`` of each of its edges whose from or to vertex a vertex
  ``delete`` names, and of each edge touching a vertex type that a ``truncate`` empties;
- a vertex table gets an ``insert_if_absent`` with no attributes for the source vertex of
  every edge insert (``patch`` / ``insert_if_absent`` of an edge).

Undirected edges (and edges with a reverse type) arrive as two messages, origin and
switched: both are edges of their own and are kept as such.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pyspark_jobs.gold.history_events import EVENT_COLUMNS, as_events

EDGE_KEY = ("from_type", "from_uid", "to_type", "to_uid", "discriminator")
_CHANGES = "map<string, struct<op: string, value: string, ts: bigint>>"


def _key_part(name: str) -> F.Column:
    return F.from_json(F.col("_record_key"), "map<string, string>")[name]


def edge_cascade_deletes(edge_events: DataFrame, source_history: DataFrame) -> DataFrame:
    """Deletes of the edges in ``edge_events`` that vertex deletes/truncates remove.

    ``source_history``: change-log rows of the whole source (vertex rows carry
    ``entity_kind`` ``vertex`` and ``entity`` = vertex type).
    """
    edges = edge_events.select(
        "_record_key",
        *[_key_part(k).alias(k) for k in ("from_type", "from_uid", "to_type", "to_uid")],
    ).distinct()
    vertex = source_history.where(F.col("entity_kind") == "vertex")
    deleted = vertex.where(F.col("op") == "delete").select(
        F.col("entity").alias("v_type"),
        F.from_json("record_key", "map<string, string>")["uid"].alias("v_uid"),
        *EVENT_COLUMNS[1:],
    )
    emptied = vertex.where(F.col("op") == "truncate").select(
        F.col("entity").alias("v_type"), *EVENT_COLUMNS[1:]
    )
    # Two equi-joins (from side, to side) instead of one OR join, which Spark would run
    # as a nested loop.
    hits = [
        edges.join(
            deleted,
            (edges[f"{end}_type"] == deleted.v_type) & (edges[f"{end}_uid"] == deleted.v_uid),
        )
        for end in ("from", "to")
    ] + [edges.join(emptied, edges[f"{end}_type"] == emptied.v_type) for end in ("from", "to")]
    cascades = hits[0].select("_record_key", *EVENT_COLUMNS[1:])
    for hit in hits[1:]:
        cascades = cascades.unionByName(hit.select("_record_key", *EVENT_COLUMNS[1:]))
    return cascades.withColumn("op", F.lit("delete")).dropDuplicates(["_record_key", "change_id"])


def implicit_vertices(vertex_type: str, key_column: str, source_history: DataFrame) -> DataFrame:
    """``insert_if_absent`` events of ``vertex_type`` vertices that edge inserts imply."""
    edges = as_events(
        source_history.where(
            (F.col("entity_kind") == "edge") & F.col("op").isin("patch", "insert_if_absent")
        )
    )
    return edges.where(_key_part("from_type") == vertex_type).select(
        F.to_json(F.create_map(F.lit(key_column), _key_part("from_uid"))).alias("_record_key"),
        "seq",
        "change_id",
        F.lit("insert_if_absent").alias("op"),
        F.create_map().cast(_CHANGES).alias("changes"),
        F.lit(None).cast("string").alias("row_image"),
        "source",
        "event_ts",
    )
