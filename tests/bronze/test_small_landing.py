"""Bronze's queries run without generated code when their landing files are small, and
land exactly what compiled queries land (pyspark_jobs/small_inputs.py)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from pyspark_jobs.bronze.ingest import ingest
from pyspark_jobs.config import load_config
from pyspark_jobs.settings import Settings
from pyspark_jobs.small_inputs import THRESHOLD_KEY, files_small
from tests.bronze.conftest import bronze_rows, quarantine_rows, record_line, write_config

# How a formatted physical plan marks an operator of a generated stage.
GENERATED = "[codegen id : "
INTERPRETED_LINE = "bronze: small landing files, planned without code generation"
# A line of every kind the landing parser tells apart.
LINES = [
    record_line("db.orders", 0, 0, {"op": "c", "after": {"id": 1, "n": 1.50e3}}, {"id": 1}),
    record_line("db.orders", 0, 1, None, {"id": 1}),  # tombstone
    record_line("db.orders", 1, 0, '{"op":"u"}', "k2"),  # string-encoded value
    '{"topic":"db.orders","partition":0,"offset":2,"value":{"s":"\\ud800 \\u00e9"}}',
    '{"topic":"db.orders","partition":0,"offset":3,"value":{"op":',  # not JSON
    '{"topic":"db.orders","partition":0,"offset":4,"key":null}',  # no value
    '{"topic":"db.orders","partition":"abc","offset":5,"value":"v"}',
    '{"topic":"db.orders","partition":0,"offset":6,"value":' + "[" * 900 + "]" * 900 + "}",
]


def executed_plans(spark: SparkSession, query_name: str) -> list[str]:
    """The physical plans of every SQL execution a streaming query ran, from Spark's own
    status store (the session's UI is off, its store is not)."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    executions = spark._jsparkSession.sharedState().statusStore().executionsList()
    plans = []
    for i in range(executions.size()):
        execution = executions.apply(i)
        if execution.description().startswith(f"{query_name}\n"):
            plans.append(execution.physicalPlanDescription())
    return plans


def test_small_landing_files_run_interpreted_and_land_what_compiled_queries_land(
    spark: SparkSession, empty_lake: Settings, tmp_path: Path
) -> None:
    sources = {}
    for name in ("interpreted", "compiled"):
        landing = tmp_path / "landing" / name
        landing.mkdir(parents=True)
        (landing / "a.jsonl").write_text("\n".join(LINES) + "\n")
        (landing / "b.jsonl").write_bytes(b"\x00\xff\xfe garbage\n")
        sources[name] = {"name": name, "landing": str(landing)}
    config = load_config(write_config(tmp_path, list(sources.values())))

    logged: list[str] = []
    [interpreted] = ingest(spark, empty_lake, config, ["interpreted"], log=logged.append)
    assert logged[0] == INTERPRETED_LINE
    spark.conf.set(THRESHOLD_KEY, "0")
    try:
        logged.clear()
        [compiled] = ingest(spark, empty_lake, config, ["compiled"], log=logged.append)
        assert INTERPRETED_LINE not in logged
    finally:
        spark.conf.unset(THRESHOLD_KEY)

    # The query took the setting of its start: no whole-stage code generation in any of
    # its plans, where the compiled one has it.
    interpreted_plans = executed_plans(spark, "bronze_interpreted")
    compiled_plans = executed_plans(spark, "bronze_compiled")
    assert interpreted_plans and compiled_plans
    assert not any(GENERATED in plan for plan in interpreted_plans)
    assert any(GENERATED in plan for plan in compiled_plans)
    # The session's own settings came back.
    assert spark.conf.get("spark.sql.codegen.wholeStage") != "false"

    assert (interpreted.read, interpreted.landed, interpreted.quarantined) == (9, 4, 5)
    assert (compiled.read, compiled.landed, compiled.quarantined) == (9, 4, 5)
    assert bronze_rows(spark, "interpreted") == bronze_rows(spark, "compiled")
    assert quarantine_rows(spark, "interpreted") == quarantine_rows(spark, "compiled")


def test_only_known_sizes_within_the_threshold_together_are_small(spark: SparkSession) -> None:
    assert files_small(spark, [1024, 2048])
    assert not files_small(spark, [])  # nothing to read: nothing to plan
    assert not files_small(spark, [1024, None])  # a Kafka source: not known
    spark.conf.set(THRESHOLD_KEY, "3000")
    try:
        assert files_small(spark, [1000, 2000])
        assert not files_small(spark, [1000, 2001])  # together, not each
    finally:
        spark.conf.unset(THRESHOLD_KEY)
    spark.conf.set(THRESHOLD_KEY, "0")
    try:
        assert not files_small(spark, [1])
    finally:
        spark.conf.unset(THRESHOLD_KEY)
