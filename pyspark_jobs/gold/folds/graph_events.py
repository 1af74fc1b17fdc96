"""A TigerGraph source's events, with what TigerGraph does without sending a message.

TigerGraph sends no CDC message when a vertex delete (or a vertex-type delete) removes
the edges touching it, nor when an edge insert creates its missing source vertex. These
become events derived from the message that caused them (same ``seq`` and
``change_id``), so the ordered fold of each key sees them in place:

- a vertex table gets an ``insert_if_absent`` with no attributes for the source vertex of
  every edge insert (``patch`` / ``insert_if_absent`` of an edge), if that vertex type is
  declared;
- a vertex-type truncate deletes every vertex of the type the history knows;
- an edge table gets a ``delete`` of each of its edges whose from or to vertex a vertex
  ``delete`` names, and of each edge touching a vertex type a truncate empties.

Undirected edges (and edges with a reverse type) arrive as two messages, origin and
switched: both are edges of their own and are kept as such.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pyspark_jobs.gold.folds.events import EVENT_COLUMNS, as_events, expand_truncates, is_table_wide
from pyspark_jobs.gold.folds.shared import CHANGES_TYPE, TABLE_WIDE_KEY
from pyspark_jobs.materialize import materialized

EDGE_ENDS = ("from", "to")


def _key_part(name: str) -> Column:
    return F.from_json(F.col("_record_key"), "map<string, string>")[name]


def _implicit_source_vertices(edges: DataFrame, vertex_specs: DataFrame) -> DataFrame:
    """``insert_if_absent`` events of the source vertices that edge inserts imply."""
    inserts = edges.where(F.col("op").isin("patch", "insert_if_absent"))
    return inserts.join(
        F.broadcast(vertex_specs),
        (inserts.source == vertex_specs.v_source) & (_key_part("from_type") == vertex_specs.v_type),
    ).select(
        vertex_specs.v_table.alias("table_name"),
        F.to_json(F.create_map(vertex_specs.v_key, _key_part("from_uid"))).alias("_record_key"),
        "seq",
        "change_id",
        F.lit("insert_if_absent").alias("op"),
        F.create_map().cast(CHANGES_TYPE).alias("changes"),
        F.lit(None).cast("string").alias("row_image"),
        "source",
        "event_ts",
    )


def _edge_cascade_deletes(
    edge_events: DataFrame, vertex_events: DataFrame, vertex_specs: DataFrame
) -> DataFrame:
    """Deletes of the edges in ``edge_events`` that vertex deletes and truncates remove."""
    edges = edge_events.select(
        "table_name",
        "_record_key",
        "source",
        *[
            _key_part(f"{end}_{part}").alias(f"{end}_{part}")
            for end in EDGE_ENDS
            for part in ("type", "uid")
        ],
    ).distinct()
    named = vertex_events.join(
        F.broadcast(vertex_specs.select("v_table", "v_type")),
        vertex_events.table_name == F.col("v_table"),
    )
    cause = [F.col(c).alias(f"c_{c}") for c in EVENT_COLUMNS[2:]]
    deleted = named.where(
        (F.col("op") == "delete") & (F.col("_record_key") != TABLE_WIDE_KEY)
    ).select(
        F.col("v_type"),
        F.from_json("_record_key", "map<string, string>")["uid"].alias("v_uid"),
        *cause,
    )
    emptied = named.where(is_table_wide()).select(F.col("v_type"), *cause)
    # Equi-joins per edge end instead of one OR join, which Spark would run as a nested loop.
    hits = [
        edges.join(
            deleted,
            (edges[f"{end}_type"] == deleted.v_type)
            & (edges[f"{end}_uid"] == deleted.v_uid)
            & (edges.source == deleted.c_source),
        )
        for end in EDGE_ENDS
    ] + [
        edges.join(
            emptied,
            (edges[f"{end}_type"] == emptied.v_type) & (edges.source == emptied.c_source),
        )
        for end in EDGE_ENDS
    ]
    columns: list[str | Column] = [
        "table_name",
        "_record_key",
        *(F.col(f"c_{c}").alias(c) for c in EVENT_COLUMNS[2:]),
    ]
    cascades = hits[0].select(*columns)
    for hit in hits[1:]:
        cascades = cascades.unionByName(hit.select(*columns))
    return cascades.withColumn("op", F.lit("delete")).dropDuplicates(
        ["table_name", "_record_key", "change_id"]
    )


def graph_events(history: DataFrame, specs: DataFrame) -> DataFrame:
    """Every event of the graph tables in ``specs``: their own change-log rows in
    ``history``, implicit source vertices, truncates expanded, and edge cascades."""
    graph_specs = specs.where(F.col("family") == "graph")
    own = as_events(history.join(F.broadcast(graph_specs.select("table_name")), "table_name"))
    vertex_specs = graph_specs.where(F.col("kind") == "vertex").select(
        F.col("table_name").alias("v_table"),
        F.col("source").alias("v_source"),
        F.col("entity").alias("v_type"),
        F.col("key_columns")[0].alias("v_key"),
    )
    kinds = F.broadcast(graph_specs.select("table_name", "kind"))
    # Each is read by several of the steps below; inlined, the plan repeated them as a
    # tree (~190 KB of plan, seconds of planning and ~25 Spark jobs for 20 new rows).
    own = materialized(own.join(kinds, "table_name"))
    edges = own.where(F.col("kind") == "edge").drop("kind")
    vertices = own.where(F.col("kind") == "vertex").drop("kind")
    vertices = materialized(
        expand_truncates(vertices.unionByName(_implicit_source_vertices(edges, vertex_specs)))
    )
    # The truncate rows themselves (vertex-type deletes) still name the type for cascades.
    vertex_truncates = own.where((F.col("kind") == "vertex") & is_table_wide()).drop("kind")
    cascades = _edge_cascade_deletes(edges, vertices.unionByName(vertex_truncates), vertex_specs)
    return vertices.unionByName(edges).unionByName(cascades)


def _involved(rows: DataFrame, specs: DataFrame) -> DataFrame:
    """``change_id``, ``table_name``, ``kind``, ``op``, ``wide`` (a table-wide row) and
    each vertex a change-log row involves (``v_source``, ``v_type``, ``v_uid``): a vertex
    row its vertex, an edge row both ends, a vertex-type truncate its type (``v_uid``
    null: every vertex of the type). Every row appears at least once: an edge table's
    truncate involves no vertex (its ``v_*`` are null)."""
    keyed = rows.join(
        F.broadcast(
            specs.select(
                "table_name",
                "kind",
                F.col("entity").alias("_type"),
                F.col("key_columns")[0].alias("_vkey"),
            )
        ),
        "table_name",
    )
    key = F.from_json("record_key", "map<string, string>")
    wide = F.col("record_key") == TABLE_WIDE_KEY

    def vertex(source: Column, typ: Column, uid: Column) -> Column:
        return F.struct(source.alias("v_source"), typ.alias("v_type"), uid.alias("v_uid"))

    involved = F.when(
        F.col("kind") == "vertex",
        F.array(vertex(F.col("source"), F.col("_type"), F.when(~wide, key[F.col("_vkey")]))),
    ).when(
        (F.col("kind") == "edge") & ~wide,
        F.array(
            *[vertex(F.col("source"), key[f"{end}_type"], key[f"{end}_uid"]) for end in EDGE_ENDS]
        ),
    )
    return keyed.select(
        "change_id",
        "table_name",
        "kind",
        "op",
        wide.alias("wide"),
        F.explode_outer(involved).alias("v"),
    ).select("change_id", "table_name", "kind", "op", "wide", "v.*")


def _touching(involved: DataFrame, vertices: DataFrame) -> DataFrame:
    """The rows of ``involved`` whose vertex is one of ``vertices`` (a null ``v_uid`` on
    either side stands for every vertex of its type).

    ``vertices`` is small next to ``involved`` (those of a run's new rows, or of the edges
    they reach) and is broadcast: three semi joins against it then shuffle nothing.
    """
    targets = F.broadcast(
        vertices.select(
            F.col("v_source").alias("t_source"),
            F.col("v_type").alias("t_type"),
            F.col("v_uid").alias("t_uid"),
        )
    )
    same_type = (F.col("v_source") == F.col("t_source")) & (F.col("v_type") == F.col("t_type"))
    exact = involved.join(
        targets.where(F.col("t_uid").isNotNull()),
        same_type & (F.col("v_uid") == F.col("t_uid")),
        "left_semi",
    )
    whole_type_here = involved.where(F.col("v_uid").isNull()).join(targets, same_type, "left_semi")
    whole_type_there = involved.join(targets.where(F.col("t_uid").isNull()), same_type, "left_semi")
    return exact.unionByName(whole_type_here).unionByName(whole_type_there)


def graph_history_rows(log: DataFrame, specs: DataFrame, changes: DataFrame) -> DataFrame:
    """The rows of ``log`` (change-log rows of the graph tables in ``specs``) that the full
    histories of the keys ``changes`` (the new rows) affect are made of.

    A key's events come from its own rows and from rows of other keys (implicit source
    vertices, cascades, type truncates), and all of them involve a vertex. So: every row
    involving a vertex a new row involves (its own rows, the edges touching it, its type's
    truncates); then, for the edges among those, the deletes and type truncates of their
    other ends (their cascades); every table-wide row (truncates are few); and every row
    of an edge table a new row truncates. A vertex reached only as the other end of an
    edge is not affected (no new event of its own), so its history may stay partial.

    The log is read twice: once for the narrow vertex index these steps all query
    (materialized), once for the rows they choose. The sides that come from the new rows
    are materialized and broadcast: inlined, each was recomputed in every step that reads
    it, and every join shuffled (a plan of ~400 nodes, ~80 Spark jobs for 20 new rows).
    """
    involved = materialized(_involved(log, specs))
    first = materialized(
        _touching(involved, _involved(changes, specs)).select("change_id").distinct()
    )
    edge_ends = involved.where(F.col("kind") == "edge").join(
        F.broadcast(first), "change_id", "left_semi"
    )
    removals = involved.where((F.col("kind") == "vertex") & F.col("op").isin("delete", "truncate"))
    second = _touching(removals, edge_ends).select("change_id")
    table_wide = involved.where(F.col("wide")).select("change_id")
    truncated_edges = (
        changes.where(F.col("record_key") == TABLE_WIDE_KEY)
        .join(F.broadcast(specs.where(F.col("kind") == "edge").select("table_name")), "table_name")
        .select("table_name")
    )
    whole_tables = involved.join(F.broadcast(truncated_edges), "table_name", "left_semi")
    wanted = materialized(
        first.unionByName(second)
        .unionByName(table_wide)
        .unionByName(whole_tables.select("change_id"))
        .distinct()
    )
    return log.join(F.broadcast(wanted), "change_id", "left_semi")
