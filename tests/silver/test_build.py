"""The silver step runs dbt only when there is something to build (pyspark_jobs/silver/build.py)."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.bronze.ingest import ingest
from pyspark_jobs.config import LakehouseConfig, load_config
from pyspark_jobs.job_names import counted_jobs
from pyspark_jobs.settings import Settings
from pyspark_jobs.silver import build
from pyspark_jobs.silver.build import (
    BATCH_TABLE,
    BUILDS_TABLE,
    SILVER_TABLES,
    build_silver,
    new_bronze,
)
from pyspark_jobs.silver.dbt_runner import DbtTestsFailed
from pyspark_jobs.silver.entity_registry import ENTITIES_TABLE
from tests.silver.landing import (
    NEW_USER,
    copy_sample,
    record,
    sample_records,
    write_config,
    write_lines,
)
from tests.support.killed_creation import leave_killed_creation


def test_nothing_new_skips_dbt_and_new_bronze_runs_only_the_incremental_models(
    spark: SparkSession, empty_lake: Settings, tmp_path: Path
):
    landing = tmp_path / "landing"
    copy_sample("debezium", landing)
    config = load_config(write_config(tmp_path / "sources.yml", {"shop_debezium": landing}))
    quiet = {"log": lambda _: None}
    # What kills inside each table's creation left: the first build creates them over it.
    for table in (BUILDS_TABLE, ENTITIES_TABLE, *SILVER_TABLES):
        leave_killed_creation(spark, table)

    target = empty_lake.dbt_dir / "target"
    artifacts = [target / "manifest.json", target / "run_results.json"]
    for artifact in artifacts:
        artifact.unlink(missing_ok=True)

    ingest(spark, empty_lake, config, **quiet)
    first = build_silver(spark, empty_lake, config, **quiet)
    logged = spark.table("silver.change_log").count()
    again = build_silver(spark, empty_lake, config, **quiet)

    write_lines(
        landing / "more.jsonl", [record("shop.public.users", 900, {"USER_ID": 990}, NEW_USER)]
    )
    ingest(spark, empty_lake, config, **quiet)
    more = build_silver(spark, empty_lake, config, **quiet)

    assert (first.kind, again.kind, more.kind) == ("full", "skipped", "incremental")
    # The builds leave dbt's saved parse, not its JSON artifacts (--no-write-json).
    assert (target / "partial_parse.msgpack").is_file()
    assert not any(artifact.exists() for artifact in artifacts)
    assert again.bronze_version == first.bronze_version < more.bronze_version
    new = spark.table("silver.change_log").where('record_key = \'{"USER_ID":"990"}\'')
    assert spark.table("silver.change_log").count() == logged + 1
    assert [r["op"] for r in new.collect()] == ["upsert"]

    # A newest build recorded before builds kept the silver versions (null), and a silver
    # table gone since: nothing says silver is as it was, so every model is built.
    spark.sql(f"update {BUILDS_TABLE} set silver_versions = null")
    spark.sql("drop table silver.change_log_rejects")
    assert build_silver(spark, empty_lake, config, **quiet).kind == "full"


def test_a_new_lakes_builds_table_is_not_queried(spark: SparkSession, empty_lake: Settings):
    # Its log says it holds no file: no Spark job to find that there is no build yet.
    build._ensure_builds_table(spark)
    with counted_jobs(spark) as jobs:
        assert build._last_build(spark) is None
        assert jobs() == 0


def _unioned_formats(spark: SparkSession) -> list[str]:
    """The staging models the keyed view's stored definition reads."""
    text = spark.sql("show create table staging.int_change_log__keyed").first()[0]  # type: ignore[index]
    return sorted(set(re.findall(r"stg_cdc__(\w+)", text)))


def test_the_keyed_view_unions_only_the_configured_formats_and_a_new_format_rebuilds_it(
    spark: SparkSession, empty_lake: Settings, tmp_path: Path
):
    quiet = {"log": lambda _: None}
    debezium, cassandra = tmp_path / "debezium", tmp_path / "cassandra"
    copy_sample("debezium", debezium)
    copy_sample("cassandra", cassandra)
    one = load_config(write_config(tmp_path / "one.yml", {"shop_debezium": debezium}))
    ingest(spark, empty_lake, one, **quiet)
    first = build_silver(spark, empty_lake, one, **quiet)
    assert _unioned_formats(spark) == ["debezium"]

    both = load_config(
        write_config(
            tmp_path / "both.yml", {"shop_debezium": debezium, "inventory_cassandra": cassandra}
        )
    )
    ingest(spark, empty_lake, both, **quiet)
    second = build_silver(spark, empty_lake, both, **quiet)

    assert (first.kind, second.kind) == ("full", "full")
    assert _unioned_formats(spark) == ["cassandra", "debezium"]
    logged = {r["format"] for r in spark.table("silver.change_log").select("format").collect()}
    assert logged == {"cassandra", "debezium"}


# dbt-spark's append, after dbt's query comment: `insert into table <target> select ...`.
_INSERT_INTO_CHANGE_LOG = re.compile(r"insert\s+into\s+table\s+`?silver`?\.`?change_log`?\s", re.I)


def test_a_build_that_loses_a_commit_race_builds_again_and_lands_each_change_once(
    spark: SparkSession, empty_lake: Settings, tmp_path: Path, monkeypatch
):
    """An analyst's dbt run through a shared Thrift Server may insert into the change log
    while the pipeline's build does: Delta fails the later commit. Here the other writer
    runs the build's own insert in a second thread and the build's insert starts while
    that one's Spark job runs, so the other commits first: the build must build again,
    not fail the run, and each change must land once."""
    landing = tmp_path / "landing"
    copy_sample("debezium", landing)
    config = load_config(write_config(tmp_path / "sources.yml", {"shop_debezium": landing}))
    logged: list[str] = []
    ingest(spark, empty_lake, config, log=lambda _: None)
    build_silver(spark, empty_lake, config, log=lambda _: None)

    original_sql = SparkSession.sql
    other_writer: list[BaseException | None] = []

    def sql_with_another_writer(session, query, *args, **kwargs):  # type: ignore[no-untyped-def]
        if not other_writer and _INSERT_INTO_CHANGE_LOG.search(query):
            tracker = session.sparkContext.statusTracker()

            def write() -> None:
                try:
                    original_sql(session, query)
                    other_writer.append(None)
                except Exception as lost:  # noqa: BLE001 - the other writer may lose instead
                    other_writer.append(lost)

            thread = threading.Thread(target=write)
            thread.start()
            deadline = time.monotonic() + 60
            while not tracker.getActiveJobsIds() and thread.is_alive():
                assert time.monotonic() < deadline
                time.sleep(0.005)
            try:
                return original_sql(session, query, *args, **kwargs)
            finally:
                thread.join()
        return original_sql(session, query, *args, **kwargs)

    rounds = 0
    # The other writer's job may rarely end before the build's insert starts (then no
    # race happens): each round lands one more change, until a build has lost once.
    while not any("another writer committed to silver first" in line for line in logged):
        rounds += 1
        assert rounds <= 4, f"no commit race in {rounds - 1} rounds: {other_writer}"
        other_writer.clear()
        user = 990 + rounds
        event = {**NEW_USER, "after": {**NEW_USER["after"], "USER_ID": user}}
        write_lines(
            landing / f"more-{rounds}.jsonl",
            [record("shop.public.users", 900 + rounds, {"USER_ID": user}, event)],
        )
        ingest(spark, empty_lake, config, log=lambda _: None)
        with monkeypatch.context() as patch:
            patch.setattr(SparkSession, "sql", sql_with_another_writer)
            build = build_silver(spark, empty_lake, config, log=logged.append)
        assert build.kind == "incremental"
        assert other_writer, "the other writer never ran"

    print(f"the build lost a commit race in round {rounds}")
    assert other_writer == [None], "the other writer committed first"
    assert any(line.endswith("attempt 2 of 3") for line in logged), logged
    # The winner wrote the log: the next attempt tested all of it.
    assert "where source in" not in _compiled(empty_lake, UNIQUE_TEST)
    changes = spark.table("silver.change_log")
    assert changes.count() == changes.select("change_id").distinct().count()
    landed = changes.where(F.col("record_key").like('{"USER_ID":"99%"}')).select("record_key")
    assert sorted(r[0] for r in landed.collect()) == [
        f'{{"USER_ID":"{990 + n}"}}' for n in range(1, rounds + 1)
    ]


def _cassandra_insert(offset: int, customer: int) -> dict:
    """A sample Cassandra insert, for a new customer at a new offset."""
    sample = sample_records("cassandra")[0]
    value = json.loads(json.dumps(sample["value"]))
    value["after"]["id"]["value"] = customer
    key = {**sample["key"], "id": customer}
    return {**sample, "offset": offset, "key": key, "value": value}


# The compiled data test of change_id's uniqueness (_compiled).
UNIQUE_TEST = "silver/_silver.yml/unique_change_log_change_id"


def _compiled(settings: Settings, model: str) -> str:
    """The SQL dbt compiled for ``model`` (``folder/name``) in the last build."""
    compiled = settings.dbt_dir / "target" / "compiled" / "cdc_lakehouse" / "models"
    return (compiled / f"{model}.sql").read_text()


def _keyed_reads(settings: Settings, model: str) -> list[str]:
    """What a silver model read its keyed changes from in the last build (its compiled
    SQL): the stored batch table, the stored keyed view, or the staging models of the
    formats it inlined."""
    text = _compiled(settings, f"silver/{model}")
    if BATCH_TABLE in text:
        return ["the batch table"]
    if "staging.int_change_log__keyed" in text:
        return ["the keyed view"]
    return sorted(set(re.findall(r"stg_cdc__(\w+)", text)))


def test_an_incremental_build_reads_only_the_formats_with_new_bronze_rows(
    spark: SparkSession, empty_lake: Settings, tmp_path: Path
):
    logged: list[str] = []
    quiet = {"log": lambda _: None}
    debezium, cassandra = tmp_path / "debezium", tmp_path / "cassandra"
    copy_sample("debezium", debezium)
    copy_sample("cassandra", cassandra)
    landings = {"shop_debezium": debezium, "inventory_cassandra": cassandra}
    config = load_config(write_config(tmp_path / "both.yml", landings))
    ingest(spark, empty_lake, config, **quiet)
    first = build_silver(spark, empty_lake, config, **quiet)
    assert new_bronze(spark, config, first.bronze_version) == build.NewBronze([], [], None, 0)
    # A full build keys bronze once, into the table both silver models read.
    assert _keyed_reads(empty_lake, "change_log") == ["the batch table"]
    assert _keyed_reads(empty_lake, "change_log_rejects") == ["the batch table"]
    assert sorted(str(r) for r in spark.table(BATCH_TABLE).collect()) == sorted(
        str(r) for r in spark.table("staging.int_change_log__keyed").collect()
    )

    # Two ingests and no build between: both formats are new to silver.
    write_lines(cassandra / "more.jsonl", [_cassandra_insert(900, 1990)])
    ingest(spark, empty_lake, config, **quiet)
    user = record("shop.public.users", 900, {"USER_ID": 990}, NEW_USER)
    write_lines(debezium / "more.jsonl", [user])
    ingest(spark, empty_lake, config, **quiet)
    landed = new_bronze(spark, config, first.bronze_version)
    assert landed is not None and landed.formats == ["cassandra", "debezium"]
    # A source bronze holds rows of that the config no longer names: not known, read all.
    only_debezium = load_config(write_config(tmp_path / "one.yml", {"shop_debezium": debezium}))
    assert new_bronze(spark, only_debezium, first.bronze_version) is None
    second = build_silver(spark, empty_lake, config, log=logged.append)
    # Every configured format is new: the stored view serves as well.
    assert _keyed_reads(empty_lake, "change_log") == ["the keyed view"]
    both = "source in ('inventory_cassandra', 'shop_debezium')"
    assert both in _compiled(empty_lake, "silver/change_log")
    assert both in _compiled(empty_lake, UNIQUE_TEST)

    event = {**NEW_USER, "after": {**NEW_USER["after"], "USER_ID": 991}}
    user = record("shop.public.users", 901, {"USER_ID": 991}, event)
    write_lines(debezium / "last.jsonl", [user])
    ingest(spark, empty_lake, config, **quiet)
    third = build_silver(spark, empty_lake, config, log=logged.append)

    assert (second.kind, third.kind) == ("incremental", "incremental")
    assert _keyed_reads(empty_lake, "change_log") == ["debezium"]
    # The log's reads of itself (the anti join on change_id, the unique test) read the
    # Debezium source's partition only: a change id includes its source.
    debezium_files = len(
        spark.table("silver.change_log").where("source = 'shop_debezium'").inputFiles()
    )
    for compiled in ("silver/change_log", UNIQUE_TEST):
        query = _compiled(empty_lake, compiled)
        assert "source in ('shop_debezium')" in query
        assert _files_read(spark, query, "silver.change_log") == debezium_files
    assert _keyed_reads(empty_lake, "change_log_rejects") == ["debezium"]
    assert "silver: new bronze rows of debezium only: the keyed model reads those" in logged
    new_keys = {
        (r["source"], r["record_key"])
        for r in spark.table("silver.change_log")
        .where(F.col("lineage.bronze_commit_version") > first.bronze_version)
        .collect()
    }
    assert new_keys == {
        ("inventory_cassandra", '{"id":"1990","registration_date":"1562202942545"}'),
        ("shop_debezium", '{"USER_ID":"990"}'),
        ("shop_debezium", '{"USER_ID":"991"}'),
    }
    # The stored view still unions every configured format (analysts read it).
    assert _unioned_formats(spark) == ["cassandra", "debezium"]

    # A duplicate of a Cassandra change written by another hand, then a batch of Debezium
    # rows only: the log changed since the last tested build, so the test reads all of
    # it, and finds the duplicate.
    spark.table("silver.change_log").where("source = 'inventory_cassandra'").limit(1).write.format(
        "delta"
    ).mode("append").saveAsTable("silver.change_log")
    event = {**NEW_USER, "after": {**NEW_USER["after"], "USER_ID": 992}}
    write_lines(debezium / "4.jsonl", [record("shop.public.users", 902, {"USER_ID": 992}, event)])
    ingest(spark, empty_lake, config, **quiet)
    with pytest.raises(DbtTestsFailed, match="unique_change_log_change_id"):
        build_silver(spark, empty_lake, config, **quiet)
    assert "where source in" not in _compiled(empty_lake, UNIQUE_TEST)
    assert "where source in" not in _compiled(empty_lake, "silver/change_log")


def _files_read(spark: SparkSession, query: str, table: str = "bronze.cdc_raw") -> int:
    """Run ``query`` and count the files of ``table`` its scans read (Spark's scan
    metrics, in the final plan of adaptive execution)."""
    frame = spark.sql(query)
    frame.collect()
    files = 0
    pending = [frame._jdf.queryExecution().executedPlan()]
    while pending:
        node = pending.pop()
        if node.nodeName() == "AdaptiveSparkPlan":
            pending.append(node.executedPlan())
            continue
        if "QueryStage" in node.nodeName():
            pending.append(node.plan())
        if node.nodeName().endswith(f".{table}") and node.metrics().contains("numFiles"):
            files += int(node.metrics().get("numFiles").get().value())
        children = node.children().iterator()
        while children.hasNext():
            pending.append(children.next())
    return files


def _debezium_built(
    spark: SparkSession, settings: Settings, folder: Path
) -> tuple[Path, LakehouseConfig, build.SilverBuild]:
    """The Debezium sample landed under ``folder``, ingested and built once: its landing
    folder, config and first build."""
    landing = folder / "debezium"
    copy_sample("debezium", landing)
    config = load_config(write_config(folder / "sources.yml", {"shop_debezium": landing}))
    ingest(spark, settings, config, log=lambda _: None)
    return landing, config, build_silver(spark, settings, config, log=lambda _: None)


def test_an_incremental_build_on_a_large_bronze_reads_only_the_files_landed_since(
    spark: SparkSession, empty_lake: Settings, tmp_path: Path, monkeypatch
):
    """On a bronze over the size limit (0 here), the build bounds ingested_at from below
    by the new files' statistics: its query reads those files only, and lands what they
    hold."""
    monkeypatch.setattr(build, "PRUNE_BRONZE_ABOVE_BYTES", 0)
    logged: list[str] = []
    landing, config, first = _debezium_built(spark, empty_lake, tmp_path)
    old_files = spark.sql("describe detail bronze.cdc_raw").first()["numFiles"]  # type: ignore[index]

    write_lines(
        landing / "more.jsonl", [record("shop.public.users", 900, {"USER_ID": 990}, NEW_USER)]
    )
    ingest(spark, empty_lake, config, log=lambda _: None)
    landed = new_bronze(spark, config, first.bronze_version)
    second = build_silver(spark, empty_lake, config, log=logged.append)

    assert second.kind == "incremental" and landed is not None
    assert "silver: reading bronze files landed since the last build only" in logged
    bounds = (
        spark.table("bronze.cdc_raw")
        .select(
            F.max(
                F.when(
                    F.col("_metadata.row_commit_version") <= first.bronze_version,
                    F.col("ingested_at"),
                )
            ),
            F.min(
                F.when(
                    F.col("_metadata.row_commit_version") > first.bronze_version,
                    F.col("ingested_at"),
                )
            ),
        )
        .first()
    )
    assert landed.ingested_since_ms is not None
    since = landed.ingested_since_ms - 1000
    assert bounds[0].timestamp() * 1000 < since <= bounds[1].timestamp() * 1000  # type: ignore[index]
    query = _compiled(empty_lake, "silver/change_log")
    assert f"timestamp_millis({since})" in query
    new_files = spark.sql("describe detail bronze.cdc_raw").first()["numFiles"] - old_files  # type: ignore[index]
    assert _files_read(spark, query) == new_files
    new = spark.table("silver.change_log").where(
        F.col("lineage.bronze_commit_version") > first.bronze_version
    )
    assert [r["record_key"] for r in new.collect()] == ['{"USER_ID":"990"}']
    # Only the rows landed since are keyed (the bound above is a second early).
    assert f"bronze_commit_version > {first.bronze_version}" in query

    # With the bound given, the insert does not ask the whole log for its newest version.
    assert "max(lineage.bronze_commit_version)" not in query

    # The next batch's new bounds reach dbt as environment variables: dbt parses again
    # only the files that read them, not the whole project as for a changed var, and
    # compiles the new values.
    write_lines(
        landing / "last.jsonl", [record("shop.public.users", 901, {"USER_ID": 991}, NEW_USER)]
    )
    ingest(spark, empty_lake, config, log=lambda _: None)
    landed = new_bronze(spark, config, second.bronze_version)
    third = build_silver(spark, empty_lake, config, log=lambda _: None)
    assert third.kind == "incremental" and landed is not None and landed.ingested_since_ms
    dbt_log = (empty_lake.dbt_dir / "logs" / "dbt.log").read_text()
    parse = dbt_log.rsplit("running dbt with arguments", 1)[-1]
    assert "Unable to do partial parsing" not in parse
    batch_model = "cdc_lakehouse://models/intermediate/int_change_log__batch.sql"
    assert f"Partial parsing: updated file: {batch_model}" in parse
    query = _compiled(empty_lake, "silver/change_log")
    assert f"timestamp_millis({landed.ingested_since_ms - 1000})" in query
    assert f"bronze_commit_version > {second.bronze_version}" in query
    assert build.SINCE_MS_ENV not in os.environ and build.AFTER_VERSION_ENV not in os.environ
    new = spark.table("silver.change_log").where(
        F.col("lineage.bronze_commit_version") > second.bronze_version
    )
    assert [r["record_key"] for r in new.collect()] == ['{"USER_ID":"991"}']

    # The third build as if it had failed after its append (a data test): not recorded,
    # so the next build starts after the second one's bronze version and keys 991 again;
    # the anti join on change_id keeps it out of the log a second time.
    spark.sql(f"delete from {build.BUILDS_TABLE} where bronze_version = {third.bronze_version}")
    write_lines(landing / "4.jsonl", [record("shop.public.users", 902, {"USER_ID": 992}, NEW_USER)])
    ingest(spark, empty_lake, config, log=lambda _: None)
    fourth = build_silver(spark, empty_lake, config, log=lambda _: None)
    assert fourth.kind == "incremental"
    assert f"bronze_commit_version > {second.bronze_version}" in _compiled(
        empty_lake, "silver/change_log"
    )
    new = spark.table("silver.change_log").where(
        F.col("lineage.bronze_commit_version") > second.bronze_version
    )
    assert sorted(r["record_key"] for r in new.collect()) == [
        '{"USER_ID":"991"}',
        '{"USER_ID":"992"}',
    ]


def test_a_large_incremental_batch_is_keyed_once_for_both_models(
    spark: SparkSession, empty_lake: Settings, tmp_path: Path, monkeypatch
):
    """Above ``STORE_BATCH_ABOVE_ROWS`` new bronze rows (1 here) an incremental build
    stores the keyed batch, as a full build does, and both silver models read it instead
    of each parsing and keying the batch; a smaller batch is inlined again."""
    monkeypatch.setattr(build, "PRUNE_BRONZE_ABOVE_BYTES", 0)
    monkeypatch.setattr(build, "STORE_BATCH_ABOVE_ROWS", 1)
    logged: list[str] = []
    landing, config, first = _debezium_built(spark, empty_lake, tmp_path)

    users = [record("shop.public.users", 900 + i, {"USER_ID": 990 + i}, NEW_USER) for i in range(2)]
    write_lines(landing / "two.jsonl", users)
    ingest(spark, empty_lake, config, log=lambda _: None)
    second = build_silver(spark, empty_lake, config, log=logged.append)

    assert second.kind == "incremental"
    assert "silver: 2 new bronze rows: keying them once for both models" in logged
    assert _keyed_reads(empty_lake, "change_log") == ["the batch table"]
    assert _keyed_reads(empty_lake, "change_log_rejects") == ["the batch table"]
    # The table holds the batch only: the rows landed since the first build.
    assert [r["bronze_commit_version"] for r in spark.table(BATCH_TABLE).collect()] == [
        second.bronze_version
    ] * 2
    new = spark.table("silver.change_log").where(
        F.col("lineage.bronze_commit_version") > first.bronze_version
    )
    assert sorted(r["record_key"] for r in new.collect()) == [
        '{"USER_ID":"990"}',
        '{"USER_ID":"991"}',
    ]
    assert build.STORE_BATCH_ENV not in os.environ
    stored = spark.sql(f"describe history {BATCH_TABLE}").first()["version"]  # type: ignore[index]

    # One row: inlined again, the stored batch left as it was; dbt parses again only the
    # file that reads the switch (an environment variable, not a var).
    write_lines(
        landing / "one.jsonl", [record("shop.public.users", 910, {"USER_ID": 999}, NEW_USER)]
    )
    ingest(spark, empty_lake, config, log=lambda _: None)
    third = build_silver(spark, empty_lake, config, log=logged.append)
    assert third.kind == "incremental"
    assert _keyed_reads(empty_lake, "change_log") == ["debezium"]
    assert spark.sql(f"describe history {BATCH_TABLE}").first()["version"] == stored  # type: ignore[index]
    parse = (empty_lake.dbt_dir / "logs" / "dbt.log").read_text().rsplit("running dbt with", 1)[-1]
    assert "Unable to do partial parsing" not in parse
    new = spark.table("silver.change_log").where(
        F.col("lineage.bronze_commit_version") > second.bronze_version
    )
    assert [r["record_key"] for r in new.collect()] == ['{"USER_ID":"999"}']
