"""The reconciliation frames on tiny hand-made tables: each rule can fail."""

from __future__ import annotations

from pyspark.sql import SparkSession

from pyspark_jobs.quality.frames import gold_reconciliation, silver_reconciliation

LINEAGE = "struct<topic:string, partition:int, offset:bigint>"


def test_silver_accounts_changes_redeliveries_rejects_noops_skips_and_flags_the_rest(
    spark: SparkSession,
):
    sources = spark.createDataFrame([("s",), ("d",)], "source string")
    message_event = '{"op":"m","source":{"db":"shop"},"message":{"prefix":"p","content":"eA=="}}'
    enveloped = '{"schema":{},"payload":{"op":"m","message":{"prefix":"p"}}}'
    raw = spark.createDataFrame(
        [
            ("s", "db2", "t", 0, 0, "k1", "v1"),  # in the log
            ("s", "db2", "t", 0, 1, "k1", "v1"),  # redelivery of offset 0
            ("s", "db2", "t", 0, 2, "k2", "bad"),  # rejected
            ("s", "db2", "t", 0, 3, "k1", None),  # tombstone
            ("s", "db2", "t", 0, 4, "k3", "v3"),  # lost
            ("s", "db2", "t", 0, 5, None, message_event),  # not Debezium: lost
            ("d", "debezium", "u", 0, 0, None, message_event),  # skipped by silver
            ("d", "debezium", "u", 0, 1, None, enveloped),  # skipped, in the envelope
            ("d", "debezium", "u", 0, 2, None, '{"op":"t","source":{}}'),  # lost truncate
        ],
        "source string, format string, topic string, partition int, offset bigint, "
        "key string, value string",
    )
    log = spark.createDataFrame(
        [("c1", "s", ("t", 0, 0))], f"change_id string, source string, lineage {LINEAGE}"
    )
    rejects = spark.createDataFrame([("s", ("t", 0, 2))], f"source string, lineage {LINEAGE}")

    rows = {
        r["source"]: r.asDict() for r in silver_reconciliation(sources, raw, log, rejects).collect()
    }

    assert rows == {
        "s": {
            "source": "s",
            "bronze_records": 6,
            "changes": 1,
            "redelivered": 1,
            "rejected": 1,
            "noops": 1,
            "skipped": 0,
            "unaccounted": 2,
            "reject_rate": 1 / 6,
        },
        "d": {
            "source": "d",
            "bronze_records": 3,
            "changes": 0,
            "redelivered": 0,
            "rejected": 0,
            "noops": 0,
            "skipped": 2,
            "unaccounted": 1,
            "reject_rate": 0.0,
        },
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
