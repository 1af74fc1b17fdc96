"""The reconciliation frames on tiny hand-made tables: each rule can fail."""

from __future__ import annotations

from pyspark.sql import SparkSession

from pyspark_jobs.quality.frames import gold_reconciliation, silver_reconciliation

LINEAGE = "struct<topic:string, partition:int, offset:bigint>"


def test_silver_accounts_changes_redeliveries_rejects_noops_and_flags_the_rest(
    spark: SparkSession,
):
    sources = spark.createDataFrame([("s",)], "source string")
    raw = spark.createDataFrame(
        [
            ("s", "t", 0, 0, "k1", "v1"),  # in the log
            ("s", "t", 0, 1, "k1", "v1"),  # redelivery of offset 0
            ("s", "t", 0, 2, "k2", "bad"),  # rejected
            ("s", "t", 0, 3, "k1", None),  # tombstone
            ("s", "t", 0, 4, "k3", "v3"),  # lost
        ],
        "source string, topic string, partition int, offset bigint, key string, value string",
    )
    log = spark.createDataFrame(
        [("c1", "s", ("t", 0, 0))], f"change_id string, source string, lineage {LINEAGE}"
    )
    rejects = spark.createDataFrame([("s", ("t", 0, 2))], f"source string, lineage {LINEAGE}")

    row = silver_reconciliation(sources, raw, log, rejects).first().asDict()

    assert row == {
        "source": "s",
        "bronze_records": 5,
        "changes": 1,
        "redelivered": 1,
        "rejected": 1,
        "noops": 1,
        "unaccounted": 1,
        "reject_rate": 0.2,
    }


def test_gold_counts_deleted_unlogged_and_missing_keys(spark: SparkSession):
    tables = spark.createDataFrame(
        [("gold.t", "s", "t", "row", None)],
        "table string, source string, table_name string, entity_kind string, "
        "schema_differences string",
    )
    live = spark.createDataFrame(
        [("gold.t", "a"), ("gold.t", "d"), ("gold.t", "x")], "table string, record_key string"
    )
    log = spark.createDataFrame(
        [
            ("s", "t", "a", "upsert", [1]),
            ("s", "t", "d", "upsert", [1]),
            ("s", "t", "d", "delete", [2]),  # deleted last, still live: wrong
            ("s", "t", "m", "upsert", [1]),  # live in the log, missing in gold: wrong
        ],
        "source string, table_name string, record_key string, op string, seq array<bigint>",
    )

    row = gold_reconciliation(tables, live, log).first().asDict()

    assert row == {
        "table": "gold.t",
        "entity_kind": "row",
        "schema_differences": None,
        "live_rows": 3,
        "expected_live_keys": 2,
        "deleted_keys_live": 1,
        "live_keys_not_in_log": 1,
        "expected_keys_missing": 1,
        "partial_changes": 0,
        "unlogged_keys_allowed": 0,
        "missing_keys_allowed": 0,
    }
