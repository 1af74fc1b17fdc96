"""SCD type 2 history of a gold table (``gold.<table>_history``), built from the changes.

With ``history: true`` the history of every key a run touches is rebuilt from the key's
changes in the change log (as of the version applied), not from a diff against gold: the
key's state after each change, in ``seq`` order, by the table's own fold family.
Consecutive equal states are one version; a version starts at the change that made it
(``_change_id``, ``_seq``, ``valid_from`` = its event time) and ends where the next state
begins (``valid_to``); a delete closes the version and opens none. So the history does not
depend on how changes were batched into runs, a late change lands in its place in the
history, and rewriting a key's versions (MERGE keyed by ``_record_key`` and
``_change_id``) is safe to repeat after a crash.
"""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.catalog import table_exists
from pyspark_jobs.config import Entity
from pyspark_jobs.gold.folds.shared import sorted_entries
from pyspark_jobs.gold.merge import append_inserts, differs
from pyspark_jobs.gold.tables import gold_table_name, quote, spark_type
from pyspark_jobs.gold.typed_values import cast_value, key_columns
from pyspark_jobs.storage import clear_killed_creation

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


def create_history_table(spark: SparkSession, entity: Entity, replace: bool = False) -> None:
    """Create the history table with the declared layout (``replace``: as an empty new
    version of an existing table)."""
    wanted = [(c, spark_type(t)) for c, t in entity.columns.items()] + list(HISTORY_COLUMNS)
    cols = ", ".join(f"{quote(c)} {t}" for c, t in wanted)
    verb = "create or replace table" if replace else "create table"
    clear_killed_creation(spark, history_table_name(entity))
    spark.sql(f"{verb} {history_table_name(entity)} ({cols}) using delta")


def ensure_history_table(spark: SparkSession, entity: Entity) -> None:
    """Create the history table, or add newly declared columns to it."""
    name = history_table_name(entity)
    wanted = [(c, spark_type(t)) for c, t in entity.columns.items()] + list(HISTORY_COLUMNS)
    if not table_exists(spark, name):
        create_history_table(spark, entity)
        return
    existing = {f.name.lower() for f in spark.table(name).schema.fields}
    missing = [(c, t) for c, t in wanted if c.lower() not in existing]
    if missing:
        spark.sql(
            f"alter table {name} add columns ({', '.join(f'{quote(c)} {t}' for c, t in missing)})"
        )


def _same_state(a: Column, b: Column) -> Column:
    return (a["live"] == b["live"]) & (
        ~a["live"] | (sorted_entries(a["image"]) == sorted_entries(b["image"]))
    )


def versions(states: DataFrame) -> DataFrame:
    """Each key's versions from its states after every change (``states``, in order).

    Returns ``table_name``, ``_record_key``, ``_image``, ``_seq``, ``_change_id``,
    ``valid_from``, ``valid_to``, ``is_current``.
    """
    kept = F.filter(
        "states",
        lambda s, i: F.when(i == 0, F.lit(True)).otherwise(
            ~_same_state(s, F.get(F.col("states"), i - 1))
        ),
    ).alias("kept")
    starts = states.select("table_name", "_record_key", kept).select(
        "table_name", "_record_key", "kept", F.posexplode("kept").alias("i", "s")
    )
    following = F.try_element_at("kept", F.col("i") + 2)
    return starts.where(F.col("s.live")).select(
        "table_name",
        "_record_key",
        F.col("s.image").alias("_image"),
        F.col("s.seq").alias("_seq"),
        F.col("s.change_id").alias("_change_id"),
        F.col("s.event_ts").alias("valid_from"),
        following["event_ts"].alias("valid_to"),
        following.isNull().alias("is_current"),
    )


def typed_versions(versions: DataFrame, entity: Entity) -> DataFrame:
    """One table's versions as history rows, with ``_problems``: values that do not cast."""
    values = [
        cast_value(F.col("_image")[c], entity.columns[c], exact=True).alias(c)
        for c in entity.value_columns
    ]
    problems = [
        F.when(
            F.col("_image")[c].isNotNull()
            & cast_value(F.col("_image")[c], entity.columns[c], exact=True).isNull(),
            F.lit(f"column {c} is not a {entity.columns[c]}"),
        )
        for c in entity.value_columns
    ]
    reason = F.array_join(F.filter(F.array(*problems), lambda p: p.isNotNull()), "; ")
    return versions.select(
        *key_columns(F.col("_record_key"), entity),
        *values,
        *[name for name, _ in HISTORY_COLUMNS],
        F.when(reason != "", reason).alias("_problems")
        if problems
        else F.lit(None).cast("string").alias("_problems"),
    )


def _history_columns(entity: Entity) -> list[str]:
    return [*entity.columns, *[c for c, _ in HISTORY_COLUMNS]]


def _written(entity: Entity) -> dict[str, str | Column]:
    """The history row a version ``s`` writes (quoted column -> SQL)."""
    return {quote(c): f"s.{quote(c)}" for c in _history_columns(entity)}


def merge_history(spark: SparkSession, rows: DataFrame, keys: DataFrame, entity: Entity) -> None:
    """Make the history of ``keys`` (``_record_key``) exactly the versions in ``rows``
    (typed history rows): new versions inserted, changed ones updated, versions that no
    longer exist deleted. Repeating it changes nothing."""
    name = history_table_name(entity)
    columns = _history_columns(entity)
    existing = spark.table(name).join(keys, "_record_key", "left_semi")
    gone = (
        existing.select("_record_key", "_change_id")
        .join(rows, ["_record_key", "_change_id"], "left_anti")
        .withColumn("_drop", F.lit(True))
    )
    source = (
        rows.select(*columns)
        .withColumn("_drop", F.lit(False))
        .unionByName(gone, allowMissingColumns=True)
    )
    values = _written(entity)
    (
        DeltaTable.forName(spark, name)
        .alias("t")
        .merge(
            source.alias("s"),
            "t._record_key = s._record_key and t._change_id = s._change_id",
        )
        .whenMatchedDelete(condition="s._drop")
        .whenMatchedUpdate(condition=f"not s._drop and ({differs(columns)})", set=values)
        .whenNotMatchedInsert(condition="not s._drop", values=values)
        .execute()
    )


def insert_into_empty_history(spark: SparkSession, rows: DataFrame, entity: Entity) -> None:
    """What ``merge_history`` does to a history table without rows, as one append: every
    version inserted, as its insert clause writes it (nothing there to update or delete).

    Only for a table whose log says it holds no file: once the append commits, it holds
    files, so a repeat of the same run MERGEs and changes nothing.
    """
    append_inserts(spark, history_table_name(entity), rows, _written(entity))
