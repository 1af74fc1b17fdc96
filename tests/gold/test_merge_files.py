"""A small batch applied to a large table rewrites (almost) nothing it does not touch; on
small tables it rewrites the few small files it touches instead of writing deletion
vectors."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from pyspark_jobs.config import Entity, Source
from pyspark_jobs.gold import apply as gold_apply
from pyspark_jobs.gold.apply import (
    DELETION_VECTORS_KEY,
    MERGE_SOURCE_KEY,
    apply_gold,
    rewrites_most_rows,
)
from pyspark_jobs.job_names import counted_jobs
from pyspark_jobs.small_inputs import THRESHOLD_KEY
from tests.gold.changelog import append, change, config, create_change_log

BIG = Entity("BIG", "big", ("id",), {"id": "bigint", "v": "string"})
SRC = Source("bigsrc", "pr_update", (BIG,), landing=None)
CFG = config(SRC)


def last_commit(spark: SparkSession) -> tuple[str, dict[str, int]]:
    """The operation of gold.big's newest commit and its metrics."""
    commit = spark.sql("describe history gold.big limit 1").first()
    assert commit is not None
    return commit["operation"], {k: int(v) for k, v in commit["operationMetrics"].items()}


def merge_two_updates_and_a_delete(spark: SparkSession, updated: tuple[int, int], deleted: int):
    """Apply 2 updates and a delete to gold.big; the MERGE's metrics."""
    append(
        spark,
        [change(SRC, BIG, {"id": k}, "upsert", [2], row={"id": k, "v": "v1"}) for k in updated]
        + [change(SRC, BIG, {"id": deleted}, "delete", [2])],
    )
    apply_gold(spark, CFG, log=lambda _: None)
    operation, metrics = last_commit(spark)
    print("merge metrics", metrics)
    assert operation == "MERGE"
    assert (
        metrics["numTargetRowsUpdated"],
        metrics["numTargetRowsDeleted"],
        metrics["numTargetRowsInserted"],
    ) == (2, 1, 0)
    return metrics


def test_merges_rewrite_small_tables_and_mark_rows_in_large_ones(spark: SparkSession, empty_lake):
    create_change_log(spark)
    for batch in range(6):  # 3000 keys, arriving in 6 runs: several files
        append(
            spark,
            [
                change(SRC, BIG, {"id": k}, "upsert", [1], row={"id": k, "v": "v0"})
                for k in range(batch * 500, (batch + 1) * 500)
            ],
        )
        apply_gold(spark, CFG, log=lambda _: None)
    files = spark.sql("describe detail gold.big").first()["numFiles"]
    assert files >= 6

    # Small (every table under small_inputs' threshold): the touched files are copied
    # without their old rows, with no deletion vector to write now and read later.
    small = merge_two_updates_and_a_delete(spark, (7, 1234), 2999)
    assert small["numTargetDeletionVectorsAdded"] == 0
    assert 1 <= small["numTargetFilesRemoved"] <= 3 < files
    assert small["numTargetRowsCopied"] > 0
    # The session's own setting is back after the apply.
    assert spark.conf.get("spark.databricks.delta.merge.deletionVectors.persistent", None) in (
        None,
        "true",
    )

    # Large (every table counts as large): deletion vectors mark the old rows instead of
    # copying the rest of their files.
    spark.conf.set(THRESHOLD_KEY, "0")
    try:
        large = merge_two_updates_and_a_delete(spark, (8, 1500), 2998)
    finally:
        spark.conf.unset(THRESHOLD_KEY)
    assert large["numTargetDeletionVectorsAdded"] > 0
    assert large["numTargetRowsCopied"] == 0
    assert large["numTargetFilesRemoved"] == 0
    assert large["numTargetFilesAdded"] <= 2

    assert spark.table("gold.big").count() == 2998
    assert sorted(
        tuple(r)
        for r in spark.table("gold.big")
        .where("id in (7, 8, 9, 1234, 1500, 2998, 2999)")
        .select("id", "v", "_seq")
        .collect()
    ) == [(7, "v1", [2]), (8, "v1", [2]), (9, "v0", [1]), (1234, "v1", [2]), (1500, "v1", [2])]

    # Large again, but a run that changes most of the rows (2,000 of 2,998): the touched
    # files are rewritten, as on small tables, instead of a deletion vector for each.
    append(
        spark,
        [change(SRC, BIG, {"id": k}, "upsert", [3], row={"id": k, "v": "v2"}) for k in range(2000)],
    )
    spark.conf.set(THRESHOLD_KEY, "0")
    try:
        apply_gold(spark, CFG, log=lambda _: None)
    finally:
        spark.conf.unset(THRESHOLD_KEY)
    operation, metrics = last_commit(spark)
    assert (operation, metrics["numTargetRowsUpdated"]) == ("MERGE", 2000)
    assert metrics["numTargetDeletionVectorsAdded"] == 0
    assert metrics["numTargetFilesRemoved"] >= 1 and metrics["numTargetRowsCopied"] > 0
    assert spark.conf.get(DELETION_VECTORS_KEY, None) in (None, "true")
    versions = spark.table("gold.big").groupBy("v").count().collect()
    assert sorted(tuple(r) for r in versions) == [("v0", 998), ("v2", 2000)]


def test_a_run_rewrites_files_when_it_stages_half_the_rows_its_tables_held():
    # (rows before the run, staged rows) per MERGE; empty tables are appended to.
    assert rewrites_most_rows([(2998, 2000)])
    assert rewrites_most_rows([(1000, 500)])
    assert not rewrites_most_rows([(1000, 499)])
    assert not rewrites_most_rows([(100_000, 10), (100, 100)])
    assert rewrites_most_rows([(100, 40), (100, 60)])
    assert not rewrites_most_rows([(0, 5000), (1000, 10)])
    assert not rewrites_most_rows([(0, 5000)])
    assert not rewrites_most_rows([])


def test_the_merges_take_the_staged_rows_as_they_are(
    spark: SparkSession, empty_lake, monkeypatch: pytest.MonkeyPatch
):
    """The staged rows a run's MERGEs read are already fixed, so Delta is told not to copy
    them again before each MERGE; a setting given from outside is kept."""
    create_change_log(spark)
    append(
        spark,
        [change(SRC, BIG, {"id": k}, "upsert", [1], row={"id": k, "v": "v0"}) for k in range(8)],
    )
    apply_gold(spark, CFG, log=lambda _: None)  # the first apply: an append, no MERGE
    merges: list[tuple[Any, int]] = []
    merge = gold_apply.merge_into_gold

    def counted_merge(session: SparkSession, rows: DataFrame, entity: Entity):
        with counted_jobs(session) as jobs:
            done = merge(session, rows, entity)
            merges.append((session.conf.get(MERGE_SOURCE_KEY, None), jobs()))
        return done

    monkeypatch.setattr(gold_apply, "merge_into_gold", counted_merge)
    merge_two_updates_and_a_delete(spark, (1, 2), 3)
    assert spark.conf.get(MERGE_SOURCE_KEY, None) is None  # back as it was
    spark.conf.set(MERGE_SOURCE_KEY, "all")
    try:
        merge_two_updates_and_a_delete(spark, (4, 5), 6)
        assert spark.conf.get(MERGE_SOURCE_KEY) == "all"
    finally:
        spark.conf.unset(MERGE_SOURCE_KEY)
    (ours, jobs), (outside, jobs_copying) = merges
    assert (ours, outside) == ("none", "all")
    # Delta's copy of the source is a Spark job of its own.
    assert jobs < jobs_copying
    assert sorted(tuple(r) for r in spark.table("gold.big").select("id", "v").collect()) == [
        (0, "v0"),
        (1, "v1"),
        (2, "v1"),
        (4, "v1"),
        (5, "v1"),
        (7, "v0"),
    ]
