"""A table's first apply: what gold skips when a table holds nothing yet, and that the
skipped work would not have changed a row.

- a table without files is appended to instead of merged into (``insert_into_empty_gold``,
  for a history table ``insert_into_empty_history``, for the tombstones and the rejects
  ``appended_to_empty``);
- the progress and pending tables are not queried while they hold no files;
- its gold rows and the tombstones are not scanned when there are none;
- when every change-log row of the folded tables is new, the re-fold histories are made
  of the new rows, without reading the log again.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.config import Entity, Source
from pyspark_jobs.delta_log import latest_version
from pyspark_jobs.gold import apply as gold_apply
from pyspark_jobs.gold import merge as gold_merge
from pyspark_jobs.gold.apply import apply_gold
from pyspark_jobs.gold.change_feed import CHANGE_LOG_TABLE, applied_progress, new_changes
from pyspark_jobs.gold.fold_inputs import gather
from pyspark_jobs.gold.folds import FAMILIES
from pyspark_jobs.gold.merge import insert_into_empty_gold, merge_into_gold, typed_rows
from pyspark_jobs.gold.staging import ensure_pending_table, unfinished_run
from pyspark_jobs.gold.table_specs import gold_tables
from pyspark_jobs.gold.tables import ensure_gold_table, ensure_state_tables
from pyspark_jobs.job_names import counted_jobs
from pyspark_jobs.materialize import materialized
from pyspark_jobs.settings import Settings
from tests.conftest import reset_lake
from tests.gold.changelog import append, change, config, create_change_log, rows
from tests.gold.test_crash_points import BATCH_1 as CRASH_BATCH
from tests.gold.test_crash_points import CONFIG as CRASH_CONFIG
from tests.gold.test_crash_points import snapshot as crash_snapshot
from tests.gold.test_crash_points import user
from tests.gold.test_graph_apply import BATCH_1, BATCH_2
from tests.gold.test_graph_apply import CONFIG as GRAPH_CONFIG

COLUMNS = {"id": "bigint", "v": "string", "n": "int", "at": "timestamp"}
STATES_SCHEMA = (
    "_record_key string, _image map<string, string>, _seq array<bigint>, _change_id string, "
    "_source string, _event_ts timestamp, _cell_ts map<string, bigint>, _live boolean"
)
STATES = [
    # A live key with every value, one with nulls and a cell time, and a deleted key.
    ('{"id":"1"}', {"v": "a", "n": "7", "at": "2024-01-02 03:04:05"}, [1, 0], "c1", "s",
     datetime(2024, 1, 1), None, True),
    ('{"id":"2"}', {"v": None, "n": None, "at": None}, [2, 0], "c2", "s",
     datetime(2024, 1, 2), {"v": 5}, True),
    ('{"id":"3"}', None, [3, 0], "c3", "s", datetime(2024, 1, 3), None, False),
]  # fmt: skip


def table_rows(spark: SparkSession, table: str) -> list[tuple]:
    frame = spark.table(table).drop("_updated_at")  # the apply's own time
    return sorted((tuple(r) for r in frame.select(*sorted(frame.columns)).collect()), key=repr)


def test_an_append_into_an_empty_table_writes_what_a_merge_would(spark: SparkSession, empty_lake):
    states: DataFrame = spark.createDataFrame(STATES, STATES_SCHEMA)
    for soft_delete in (False, True):
        merged = Entity(
            "M", f"merged_{int(soft_delete)}", ("id",), COLUMNS, soft_delete=soft_delete
        )
        appended = Entity(
            "A", f"appended_{int(soft_delete)}", ("id",), COLUMNS, soft_delete=soft_delete
        )
        for entity in (merged, appended):
            ensure_gold_table(spark, entity)
            # A column the table has and config no longer declares: a MERGE's insert
            # leaves it null.
            spark.sql(f"alter table gold.{entity.table} add columns (legacy string)")
        merge_into_gold(spark, typed_rows(states, merged), merged)
        insert_into_empty_gold(spark, typed_rows(states, appended), appended)

        expected = table_rows(spark, f"gold.{merged.table}")
        assert table_rows(spark, f"gold.{appended.table}") == expected, soft_delete
        assert sorted(
            r[0] for r in spark.table(f"gold.{appended.table}").select("id").collect()
        ) == [1, 2]


SRC_ENTITY = Entity("E", "first", ("id",), {"id": "bigint", "v": "string"})
SRC = Source("firstsrc", "pr_update", (SRC_ENTITY,), landing=None)


def test_a_first_apply_appends_and_later_applies_merge(spark: SparkSession, empty_lake):
    create_change_log(spark)
    append(
        spark,
        [
            change(SRC, SRC_ENTITY, {"id": 1}, "upsert", [1], row={"id": 1, "v": "a"}),
            change(SRC, SRC_ENTITY, {"id": 2}, "upsert", [2], row={"id": 2, "v": "b"}),
            change(SRC, SRC_ENTITY, {"id": 2}, "delete", [3]),
            change(SRC, SRC_ENTITY, {"id": 3}, "delete", [4]),
        ],
    )
    (first,) = apply_gold(spark, config(SRC), log=lambda _: None)
    assert (first.inserted, first.updated, first.deleted, first.rows) == (1, 0, 0, 1)
    assert rows(spark, "gold.first", ["id", "v"]) == [(1, "a")]
    written = spark.sql("describe history gold.first").orderBy("version").collect()
    assert [r["operation"] for r in written][-1] == "WRITE"  # the append, not a MERGE

    append(
        spark,
        [
            change(SRC, SRC_ENTITY, {"id": 1}, "upsert", [5], row={"id": 1, "v": "a2"}),
            change(SRC, SRC_ENTITY, {"id": 4}, "upsert", [6], row={"id": 4, "v": "d"}),
        ],
    )
    (second,) = apply_gold(spark, config(SRC), log=lambda _: None)
    assert (second.inserted, second.updated, second.deleted, second.rows) == (1, 1, 0, 2)
    assert rows(spark, "gold.first", ["id", "v"]) == [(1, "a2"), (4, "d")]
    assert spark.sql("describe history gold.first limit 1").first()["operation"] == "MERGE"


def histories(frame: DataFrame) -> list[str]:
    return sorted(r[0] for r in frame.select(F.to_json(F.struct("*"))).collect())


def test_a_first_fold_takes_the_histories_from_the_new_rows(spark: SparkSession, empty_lake):
    """Implicit vertices, cascades and a type truncate: the events derived from other
    keys' rows are the same whether the history is read again from the log or not."""
    create_change_log(spark)
    append(spark, BATCH_1)
    append(spark, BATCH_2)
    ensure_state_tables(spark)
    tables = gold_tables(GRAPH_CONFIG)
    for table in tables:
        ensure_gold_table(spark, table.entity)
    names = [t.table for t in tables]
    up_to = latest_version(spark, CHANGE_LOG_TABLE)
    new = materialized(new_changes(spark, {}, names, up_to))

    def fold_histories(whole_log: list[str]) -> list[str]:
        inputs = gather(spark, FAMILIES["graph"], tables, new, up_to, whole_log=whole_log)
        assert inputs.histories is not None
        return histories(inputs.histories)

    from_new_rows = fold_histories(names)
    assert from_new_rows == fold_histories([])
    # Derived events are there: more events than the log has rows.
    events = sum(h.count('"change_id"') for h in from_new_rows)
    assert events > len(BATCH_1) + len(BATCH_2)


def last_operation(spark: SparkSession, table: str) -> str:
    return spark.sql(f"describe history {table} limit 1").first()["operation"]


# The crash points' first batch and a delete: a first apply of it writes every one of these
# tables, the histories and the rejects and tombstones the tables of a run share.
FIRST_BATCH = [*CRASH_BATCH, user(2, 200, "", op="delete")]
# Written by a first apply of FIRST_BATCH.
APPENDED_FIRST = (
    "gold.c_users_history",
    "gold.c_person_history",
    "lakehouse.gold_rejects",
    "lakehouse.gold_tombstones",
)


def test_a_first_apply_writes_gold_and_history_as_merges_into_the_same_empty_tables_would(
    spark: SparkSession, settings: Settings, monkeypatch: pytest.MonkeyPatch
):
    """Rejects, a cast failure, deletes, Cassandra cells, implicit vertices, edges, and
    SCD2 histories of a Debezium table and a vertex: appended, then merged as before."""
    quiet = {"log": lambda _: None}
    reset_lake(spark, settings)
    create_change_log(spark)
    append(spark, FIRST_BATCH)
    ensure_state_tables(spark)
    ensure_pending_table(spark)
    with counted_jobs(spark) as jobs:
        assert applied_progress(spark) == {}
        assert unfinished_run(spark, {}) is None
        assert jobs() == 0  # a new lake's progress and pending tables: no query
    apply_gold(spark, CRASH_CONFIG, **quiet)
    for table in APPENDED_FIRST:
        assert last_operation(spark, table) == "WRITE", table  # the append, not a MERGE
    appended = crash_snapshot(spark)
    assert all(appended[t] for t in APPENDED_FIRST)

    reset_lake(spark, settings)
    create_change_log(spark)
    append(spark, FIRST_BATCH)
    # Every table as if it held files: MERGEs into the same empty tables.
    monkeypatch.setattr(gold_apply, "holds_files", lambda *_: True)
    monkeypatch.setattr(gold_merge, "holds_files", lambda *_: True)
    apply_gold(spark, CRASH_CONFIG, **quiet)
    for table in APPENDED_FIRST:
        assert last_operation(spark, table) == "MERGE", table
    assert crash_snapshot(spark) == appended
