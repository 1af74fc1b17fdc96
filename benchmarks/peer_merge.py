"""Part: the peer on the Debezium part, what a user writes by hand. Structured Streaming
over the landing files; each micro-batch keeps the latest change per key by sequence and
applies it with one Delta MERGE (delete / update / insert clauses). Then its table is
compared with our ``gold.users``.

Params: ``lake``, ``landing`` (the Debezium landing folder), ``ours`` (the path of our
``gold.users`` Delta table).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks.child import Params, run_part
from benchmarks.compare import differences
from benchmarks.debezium_changes import LANDING_SCHEMA, USER_COLUMNS, user_changes
from benchmarks.rss import RssSampler
from pyspark_jobs.settings import Settings, join_location

TARGET = "peer.users"


def _merge_latest(spark: SparkSession) -> Callable[[DataFrame, int], None]:
    def merge_batch(batch: DataFrame, batch_id: int) -> None:
        latest = (
            user_changes(batch)
            .groupBy("USER_ID")
            .agg(F.max_by(F.struct("*"), F.struct("ts_ms", "lsn")).alias("c"))
            .select("c.*")
        )
        newer = "s.ts_ms > t.ts_ms or (s.ts_ms = t.ts_ms and s.lsn > t.lsn)"
        values: dict[str, str | Column] = {c: f"s.{c}" for c in (*USER_COLUMNS, "ts_ms", "lsn")}
        (
            DeltaTable.forName(spark, TARGET)
            .alias("t")
            .merge(latest.alias("s"), "t.USER_ID = s.USER_ID")
            .whenMatchedDelete(condition=f"s.op = 'd' and ({newer})")
            .whenMatchedUpdate(condition=f"s.op <> 'd' and ({newer})", set=values)
            .whenNotMatchedInsert(condition="s.op <> 'd'", values=values)
            .execute()
        )

    return merge_batch


def measure(
    spark: SparkSession, settings: Settings, params: Params, sampler: RssSampler
) -> dict[str, Any]:
    started = time.time()
    spark.sql("create database if not exists peer")
    spark.sql(
        f"create table if not exists {TARGET} (USER_ID bigint, TAX_CODE string, NAME string, "
        "COINS bigint, ts_ms bigint, lsn bigint) using delta"
    )
    query = (
        spark.readStream.schema(LANDING_SCHEMA)
        .json(params["landing"])
        .writeStream.foreachBatch(_merge_latest(spark))
        .option("checkpointLocation", join_location(settings.checkpoint_dir, "peer"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    seconds = time.time() - started
    ours = spark.read.format("delta").load(params["ours"])
    return {
        "seconds": seconds,
        "batches": len(query.recentProgress),
        "differences": differences(ours, spark.table(TARGET), USER_COLUMNS),
    }


if __name__ == "__main__":
    run_part(measure)
