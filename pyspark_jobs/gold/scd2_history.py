"""How a gold table's SCD type 2 history (``gold.<table>_history``) follows its MERGEs.

With ``history: true`` every applied net state closes the key's current version
(``valid_to`` = the new state's event time, ``is_current`` false) and, when the key is
live, opens a new one (``valid_from`` = its event time). A version is one applied net
state: changes folded together in one run make one version. Deletes close the version
and open none.
"""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.config import Entity
from pyspark_jobs.gold.tables import gold_table_name, quote, spark_type

HISTORY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("_record_key", "string"),
    ("_seq", "array<bigint>"),
    ("_change_id", "string"),
    ("valid_from", "timestamp"),
    ("valid_to", "timestamp"),
    ("is_current", "boolean"),
)


def history_table_name(entity: Entity) -> str:
    return f"{gold_table_name(entity)}_history"


def ensure_history_table(spark: SparkSession, entity: Entity) -> None:
    """Create the history table, or add newly declared columns to it."""
    name = history_table_name(entity)
    wanted = [(c, spark_type(t)) for c, t in entity.columns.items()] + list(HISTORY_COLUMNS)
    if not spark.catalog.tableExists(name):
        cols = ", ".join(f"{quote(c)} {t}" for c, t in wanted)
        spark.sql(f"create table {name} ({cols}) using delta")
        return
    existing = {f.name.lower() for f in spark.table(name).schema.fields}
    missing = [(c, t) for c, t in wanted if c.lower() not in existing]
    if missing:
        spark.sql(
            f"alter table {name} add columns ({', '.join(f'{quote(c)} {t}' for c, t in missing)})"
        )


def versions(rows: DataFrame, entity: Entity) -> DataFrame:
    """The MERGE source: each state once to close the current version (``_merge_key`` set)
    and, if live, once more to insert the new version (``_merge_key`` null never matches)."""
    values = [*entity.columns, "_record_key", "_seq", "_change_id"]
    base = rows.select(*values, "_event_ts", "_live")
    closing = base.withColumn("_merge_key", F.col("_record_key"))
    opening = base.where("_live").withColumn("_merge_key", F.lit(None).cast("string"))
    return closing.unionByName(opening)


def merge_history(spark: SparkSession, rows: DataFrame, entity: Entity) -> None:
    """Close and open versions for the applied states ``rows`` (typed gold rows)."""
    source = versions(rows, entity)
    insert: dict[str, str | Column] = {
        quote(c): f"s.{quote(c)}" for c in [*entity.columns, "_record_key", "_seq", "_change_id"]
    }
    insert |= {"valid_from": "s._event_ts", "valid_to": "null", "is_current": "true"}
    (
        DeltaTable.forName(spark, history_table_name(entity))
        .alias("t")
        .merge(source.alias("s"), "t._record_key = s._merge_key and t.is_current")
        .whenMatchedUpdate(set={"valid_to": "s._event_ts", "is_current": "false"})
        .whenNotMatchedInsert(condition="s._merge_key is null", values=insert)
        .execute()
    )
