"""A small batch applied to a larger table rewrites (almost) nothing it does not touch."""

from __future__ import annotations

from pyspark.sql import SparkSession

from pyspark_jobs.config import Entity, Source
from pyspark_jobs.gold.apply import apply_gold
from tests.gold.changelog import append, change, config, create_change_log

BIG = Entity("BIG", "big", ("id",), {"id": "bigint", "v": "string"})
SRC = Source("bigsrc", "pr_update", (BIG,), landing=None)


def test_small_merge_touches_few_files(spark: SparkSession, empty_lake):
    create_change_log(spark)
    cfg = config(SRC)
    for batch in range(6):  # 3000 keys, arriving in 6 runs: several files
        append(
            spark,
            [
                change(SRC, BIG, {"id": k}, "upsert", [1], row={"id": k, "v": "v0"})
                for k in range(batch * 500, (batch + 1) * 500)
            ],
        )
        apply_gold(spark, cfg, log=lambda _: None)
    files = spark.sql("describe detail gold.big").first()["numFiles"]
    append(
        spark,
        [change(SRC, BIG, {"id": k}, "upsert", [2], row={"id": k, "v": "v1"}) for k in (7, 1234)]
        + [change(SRC, BIG, {"id": 2999}, "delete", [2])],
    )
    apply_gold(spark, cfg, log=lambda _: None)
    merge = spark.sql("describe history gold.big limit 1").first()
    metrics = {k: int(v) for k, v in merge["operationMetrics"].items()}
    print("files before", files, "merge metrics", metrics)
    assert merge["operation"] == "MERGE"
    assert (
        metrics["numTargetRowsUpdated"],
        metrics["numTargetRowsDeleted"],
        metrics["numTargetRowsInserted"],
    ) == (2, 1, 0)
    assert files >= 6
    # Deletion vectors mark the old rows instead of copying the rest of their files.
    assert metrics["numTargetRowsCopied"] == 0
    assert metrics["numTargetFilesRemoved"] == 0
    assert metrics["numTargetFilesAdded"] <= 2
    assert spark.table("gold.big").count() == 2999
    assert sorted(
        tuple(r)
        for r in spark.table("gold.big")
        .where("id in (7, 1234, 2999, 8)")
        .select("id", "v", "_seq")
        .collect()
    ) == [(7, "v1", [2]), (8, "v0", [1]), (1234, "v1", [2])]
