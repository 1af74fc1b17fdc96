"""What every gold table is, as one small DataFrame the folds join by ``table_name``.

The folds run once per fold family over all its tables, so per-table facts (declared key
and value columns, their types, TigerGraph attribute defaults) travel with the rows
instead of being baked into one plan per table.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from pyspark_jobs.config import Entity, LakehouseConfig, Source
from pyspark_jobs.gold.tables import gold_table_name
from pyspark_jobs.gold.tigergraph_ops import category, type_default

SPECS_SCHEMA = (
    "table_name string, source string, entity string, kind string, family string, "
    "history boolean, key_columns array<string>, value_columns array<string>, "
    "types map<string, string>, categories map<string, string>, defaults map<string, string>"
)


@dataclass(frozen=True)
class GoldTable:
    """One configured gold table: its source, entity and fold family."""

    source: Source
    entity: Entity
    family: str

    @property
    def name(self) -> str:
        """``gold.<table>``."""
        return gold_table_name(self.entity)

    @property
    def table(self) -> str:
        """The table name as the change log's ``table_name`` holds it."""
        return self.entity.table

    @property
    def signature(self) -> str:
        """What the table's layout depends on (declared columns, options), as one string:
        a run checks a table's columns only when this changed since its last run."""
        e = self.entity
        layout = {"columns": dict(e.columns), "soft_delete": e.soft_delete, "history": e.history}
        return hashlib.sha256(json.dumps(layout, sort_keys=True).encode()).hexdigest()[:16]


def attribute_defaults(table: GoldTable) -> dict[str, str]:
    """Each value column's starting value: TigerGraph's type default unless declared.

    Only graph tables have defaults; every other family starts a key from nothing.
    """
    if table.family != "graph":
        return {}
    entity = table.entity
    return {
        c: entity.defaults.get(c, type_default(entity.columns[c])) for c in entity.value_columns
    }


def specs_frame(spark: SparkSession, tables: Sequence[GoldTable]) -> DataFrame:
    """One row per table (config is small: built on the driver on purpose)."""
    rows = [
        (
            t.table,
            t.source.name,
            t.entity.name,
            t.entity.kind,
            t.family,
            t.entity.history,
            list(t.entity.key),
            list(t.entity.value_columns),
            dict(t.entity.columns),
            {c: category(typ) for c, typ in t.entity.columns.items()},
            attribute_defaults(t),
        )
        for t in tables
    ]
    return spark.createDataFrame(rows, SPECS_SCHEMA)


def family_name(source: Source, entity: Entity) -> str:
    """The fold family of a table: ``graph``, ``document``, ``cells`` or ``rows``.

    - ``graph`` (TigerGraph vertices and edges) and ``document`` (entity-patches): ops
      that do not commute, re-folded from each touched key's history;
    - ``cells`` (Cassandra): per-cell last-write-wins against the gold row and tombstone;
    - ``rows`` (every other format): highest ``seq`` wins against the gold row and tombstone.
    """
    if entity.kind in ("vertex", "edge") or source.format == "tigergraph":
        return "graph"
    if entity.kind == "document" or source.format == "debezium_patch":
        return "document"
    if source.format == "cassandra":
        return "cells"
    return "rows"


def gold_tables(config: LakehouseConfig) -> list[GoldTable]:
    """Every configured table with its fold family, in file order."""
    return [GoldTable(s, e, family_name(s, e)) for s, e in config.tables()]
