"""`lakehouse maintain` (pyspark_jobs/maintain.py): OPTIMIZE and VACUUM change no table's
contents, remove the files nothing needs, keep the change-log files gold has yet to read,
and leave bronze's checkpoints and silver's watermark valid: the next incremental ingest,
silver build and gold run end where they would have without maintain.

One pipeline run per module. Every table's deleted-file retention is lowered to 0 hours,
so that files removed moments ago are old enough to vacuum: only the retention maintain
raises from gold's progress then keeps the change-log files gold still reads (and lets
Delta read that far back).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pyspark_jobs.bronze.ingest import ingest
from pyspark_jobs.config import load_config
from pyspark_jobs.delta_log import latest_version
from pyspark_jobs.file_growth import FileGrowth
from pyspark_jobs.gold.apply import apply_gold
from pyspark_jobs.gold.change_feed import CHANGE_LOG_TABLE
from pyspark_jobs.gold.rebuild import ensure_rebuilds_table, record_rebuild
from pyspark_jobs.maintain import (
    LAYERS,
    TableMaintenance,
    compact_grown_tables,
    interval_hours,
    layer_tables,
    maintain,
    retention_for,
)
from pyspark_jobs.settings import Settings
from pyspark_jobs.silver.build import SilverBuild, build_silver
from tests.conftest import reset_lake
from tests.silver.landing import copy_sample, record, write_config, write_lines

QUIET = {"log": lambda _: None}
TOPIC = "shop.public.users"


def user(offset: int, op: str, user_id: int, ts_ms: int, name: str = "", coins: int = 0) -> dict:
    """A Debezium event of shop.users at ``offset``, written at ``ts_ms`` (``d``: a delete)."""
    row = {"USER_ID": user_id, "TAX_CODE": f"tc-{user_id}", "NAME": name, "COINS": coins}
    value = {
        "op": op,
        "before": row if op == "d" else None,
        "after": None if op == "d" else row,
        "source": {"db": "shop", "schema": "public", "table": "users", "ts_ms": ts_ms,
                   "lsn": 5000 + offset},
        "ts_ms": ts_ms + 1,
    }  # fmt: skip
    return record(TOPIC, offset, {"USER_ID": user_id}, value)


# After the samples (offsets 0-6): Lara Croft (124) and Mario (123) live, 125 deleted at
# 1700000004000.
BATCH_2 = [
    user(7, "u", 124, 1700000020000, "Lara Croft", 50),
    user(8, "d", 123, 1700000021000),
    record(TOPIC, 9, {"USER_ID": 123}, None),  # the tombstone after the delete
    user(10, "c", 125, 1700000003500, "Anne", 8),  # older than 125's delete: stays deleted
]
BATCH_3 = [
    user(11, "c", 126, 1700000030000, "Zoe", 5),
    user(12, "c", 123, 1700000031000, "Mario", 1),
]


@dataclass
class Outcome:
    tables: list[str]
    dry_run: list[TableMaintenance]
    versions_around_dry_run: tuple[dict[str, int], dict[str, int]]
    done: list[TableMaintenance]
    lines: list[str]
    before: dict[str, list[str]]
    after: dict[str, list[str]]
    files: dict[str, tuple[set[str], set[str]]]
    log_retention: str
    gold_progress: int
    later_build: SilverBuild
    final: dict[str, list[str]]


def rows(spark: SparkSession, table: str) -> list[str]:
    return sorted(str(r) for r in spark.table(table).collect())


def files_of(spark: SparkSession, table: str) -> tuple[set[str], set[str]]:
    """(data files in the table's folder, data files of its current snapshot)."""
    location = spark.sql(f"describe detail {table}").first()["location"]  # type: ignore[index]
    folder = Path(location.removeprefix("file:"))
    on_disk = {str(p) for p in folder.rglob("*.parquet") if "_delta_log" not in p.parts}
    live = {f.removeprefix("file:") for f in spark.table(table).inputFiles()}
    return on_disk, live


@pytest.fixture(scope="module")
def outcome(
    spark: SparkSession, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Outcome:
    reset_lake(spark, settings)
    folder = tmp_path_factory.mktemp("maintain")
    landing = folder / "landing"
    copy_sample("debezium", landing)
    config = load_config(write_config(folder / "sources.yml", {"shop_debezium": landing}))
    ingest(spark, settings, config, **QUIET)
    build_silver(spark, settings, config, **QUIET)
    apply_gold(spark, config, **QUIET)
    # Batch 2 reaches silver but not gold: gold still has to read it from the change feed.
    write_lines(landing / "batch-2.jsonl", BATCH_2)
    ingest(spark, settings, config, **QUIET)
    build_silver(spark, settings, config, **QUIET)
    gold_progress = int(
        spark.table("lakehouse.gold_progress").agg({"silver_version": "max"}).first()[0]  # type: ignore[index]
    )

    tables = [t for layer in LAYERS for t in layer_tables(spark, layer)]
    for table in tables:
        spark.sql(
            f"alter table {table} set tblproperties "
            "('delta.deletedFileRetentionDuration' = 'interval 0 hours')"
        )
    versions = {t: latest_version(spark, t) for t in tables}
    dry_run = maintain(spark, config, ["bronze"], dry_run=True, **QUIET)
    around_dry_run = (versions, {t: latest_version(spark, t) for t in tables})
    before = {t: rows(spark, t) for t in tables}
    lines: list[str] = []
    done = maintain(spark, config, log=lines.append)
    after = {t: rows(spark, t) for t in tables}
    files = {t: files_of(spark, t) for t in tables}
    log_retention = spark.sql(
        f"show tblproperties {CHANGE_LOG_TABLE} ('delta.deletedFileRetentionDuration')"
    ).first()["value"]  # type: ignore[index]
    # Gold catches up on batch 2 (change-log files OPTIMIZE replaced), then batch 3 goes
    # through every layer.
    apply_gold(spark, config, **QUIET)
    write_lines(landing / "batch-3.jsonl", BATCH_3)
    ingest(spark, settings, config, **QUIET)
    later_build = build_silver(spark, settings, config, **QUIET)
    apply_gold(spark, config, **QUIET)
    final = {t: rows(spark, t) for t in tables}
    return Outcome(
        tables,
        dry_run,
        around_dry_run,
        done,
        lines,
        before,
        after,
        files,
        log_retention,
        gold_progress,
        later_build,
        final,
    )


def test_retention_arithmetic():
    assert interval_hours("interval 1 week") == 168.0
    assert interval_hours("INTERVAL 7 DAYS") == 168.0
    assert interval_hours("interval 0 hours") == 0.0
    assert interval_hours("interval 1 day 90 minutes") == 25.5
    for bad in ("", "interval", "1 fortnight", "interval 2 hours garbage"):
        with pytest.raises(ValueError):
            interval_hours(bad)
    # Never below the table's own retention; a reader of older versions raises it to
    # their age plus the same slack again.
    assert retention_for(168.0, None) == 168
    assert retention_for(168.0, 30.0) == 168
    assert retention_for(168.0, 167.5) == 168 + 168
    assert retention_for(168.0, 400.2) == 401 + 168
    assert retention_for(0.0, 0.01) == 1 + 1


def test_every_table_is_maintained_and_reported(outcome: Outcome):
    assert {m.table for m in outcome.done} == set(outcome.tables)
    assert {
        "bronze.cdc_raw",
        "bronze.cdc_quarantine",
        "silver.change_log",
        "silver.change_log_rejects",
        "lakehouse.entities",
        "lakehouse.silver_builds",
        "staging.int_change_log__batch",
        "gold.users",
        "lakehouse.gold_progress",
        "lakehouse.gold_tombstones",
    } <= set(outcome.tables)
    assert outcome.lines == [m.line() for m in outcome.done]
    raw = next(m for m in outcome.done if m.table == "bronze.cdc_raw")
    # Two ingests into one partition: compacted, and the replaced files vacuumed (bronze
    # only appends: nothing else was ever removed).
    assert raw.compacted > raw.written >= 1
    assert raw.removed == raw.compacted
    assert raw.line().startswith(
        f"maintain bronze.cdc_raw: compacted {raw.compacted} files into {raw.written}; "
        "vacuum (retain 0 h: the table's deleted-file retention) removed "
    )


def test_dry_run_changes_nothing(outcome: Outcome):
    versions_before, versions_after = outcome.versions_around_dry_run
    assert versions_after == versions_before
    assert [m.table for m in outcome.dry_run] == ["bronze.cdc_quarantine", "bronze.cdc_raw"]
    assert all(m.dry_run and m.compacted == 0 for m in outcome.dry_run)
    assert "(dry run)" in outcome.dry_run[0].line()


def test_contents_are_identical_after_maintain(outcome: Outcome):
    for table in outcome.tables:
        assert outcome.after[table] == outcome.before[table], table


def test_vacuum_removes_every_file_nothing_needs(outcome: Outcome):
    for table in outcome.tables:
        on_disk, live = outcome.files[table]
        if table != CHANGE_LOG_TABLE:
            assert on_disk == live, table


def test_change_log_keeps_the_files_gold_has_yet_to_read(outcome: Outcome):
    log = next(m for m in outcome.done if m.table == CHANGE_LOG_TABLE)
    assert log.compacted > 0
    # Gold's version is minutes old: 1 hour for its age, 1 of slack (the configured 0 h
    # is below the margin).
    assert (log.retention.hours, log.retention.configured) == (2, 0.0)
    assert outcome.log_retention == "interval 2 hours"
    assert log.line().startswith(
        f"maintain {CHANGE_LOG_TABLE}: compacted {log.compacted} files into {log.written}; "
        "vacuum (retain 2 h, raised from 0 h: gold reads the change feed from version "
        f"{outcome.gold_progress} on, 0.0 h old) removed 0 files"
    )
    on_disk, live = outcome.files[CHANGE_LOG_TABLE]
    assert live < on_disk  # the compacted files batch 2 arrived in are still there


def test_later_runs_end_as_without_maintain(spark: SparkSession, outcome: Outcome):
    for table in outcome.tables:
        if table.split(".")[0] in ("bronze", "silver"):  # append-only
            assert set(outcome.after[table]) <= set(outcome.final[table]), f"{table} lost rows"
    # Bronze: the checkpoint still knows what it read; every record landed exactly once.
    offsets = spark.table("bronze.cdc_raw").groupBy("offset").count().collect()
    assert sorted((r["offset"], r["count"]) for r in offsets) == [(o, 1) for o in range(13)]
    # Silver: OPTIMIZE kept bronze's row commit versions, silver's watermark: an
    # incremental build logs batch 3's two changes, and nothing again.
    assert outcome.later_build.kind == "incremental"
    logged = spark.table(CHANGE_LOG_TABLE).groupBy("lineage.offset").count().collect()
    assert sorted((r["offset"], r["count"]) for r in logged) == [
        (o, 1)
        for o in (0, 1, 2, 3, 4, 6, 7, 8, 10, 11, 12)  # 5 and 9: tombstones
    ]
    assert outcome.final["silver.change_log_rejects"] == []
    # Gold read batch 2 from the change feed after maintain, then batch 3: 124 updated, 123
    # deleted and created again, 125's late older create did not resurrect it.
    gold = spark.table("gold.users").select("USER_ID", "NAME", "COINS").collect()
    assert sorted(tuple(r) for r in gold) == [
        (123, "Mario", 1),
        (124, "Lara Croft", 50),
        (126, "Zoe", 5),
    ]


def test_run_every_maintains_between_cycles(monkeypatch: pytest.MonkeyPatch):
    """``run --every --maintain-every``: maintenance between two cycles, once the interval
    has passed (a clock that a cycle moves 10 s; maintenance every 25 s), and between the
    others the compaction of grown tables (``compact_files``)."""
    from pyspark_jobs import pipeline

    now = [0.0]
    events: list[str] = []
    stop = threading.Event()

    def cycle(*_, **__) -> int:
        now[0] += 10
        events.append("cycle")
        if events.count("cycle") == 7:
            stop.set()
        return pipeline.EXIT_OK

    monkeypatch.setattr(pipeline, "run_pipeline", cycle)
    monkeypatch.setattr(pipeline, "maintain", lambda *_, **__: events.append("maintain"))
    monkeypatch.setattr(pipeline, "compact_grown_tables", lambda *_, **__: events.append("compact"))
    code = pipeline.run_continuously(
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        every_seconds=0,
        stop=stop,
        log=lambda _: None,
        maintain_every_seconds=25,
        compact_files=50,
        clock=lambda: now[0],
    )
    assert code == 0
    # After cycles 3 (30 s) and 6 (60 s); nothing after the last, stopped, cycle.
    assert events == ["cycle", "compact"] * 2 + ["cycle", "maintain"] + [
        "cycle",
        "compact",
    ] * 2 + ["cycle", "maintain", "cycle"]


def test_an_unfinished_rebuild_keeps_the_version_it_reads(
    spark: SparkSession, empty_lake: Settings, sample_config
):
    """A rebuild cut short is finished from the gold table's version before it: maintain
    raises that table's retention as for the change log, and only while it is unfinished."""
    spark.sql("create database if not exists gold")
    spark.sql("create table gold.m_rebuilt (id bigint) using delta")
    spark.sql("insert into gold.m_rebuilt values (1)")
    spark.sql(
        "alter table gold.m_rebuilt set tblproperties "
        "('delta.deletedFileRetentionDuration' = 'interval 0 hours')"
    )
    ensure_rebuilds_table(spark)

    def gold_line() -> str:
        lines: list[str] = []
        maintain(spark, sample_config, ["gold"], dry_run=True, log=lines.append)
        return next(line for line in lines if line.startswith("maintain gold.m_rebuilt (dry run):"))

    record_rebuild(spark, "m_rebuilt", 1, finished=False)
    # Minutes old: 1 hour for its age, 1 of slack (the configured 0 h is below the margin).
    assert (
        "(retain 2 h, would raise from 0 h: an unfinished rebuild reads version 1, 0.0 h old)"
        in gold_line()
    )
    record_rebuild(spark, "m_rebuilt", 1, finished=True)
    assert "(retain 0 h: the table's deleted-file retention)" in gold_line()


def test_the_loop_compacts_the_tables_that_grew_and_only_those(
    spark: SparkSession, empty_lake: Settings
):
    """``compact_grown_tables``: counted from each table's Delta log, a table that gained
    the threshold of files is compacted (its rows as they were), the others are not
    touched, and a compacted table is due again only after as many new files."""
    spark.sql("create database if not exists gold")
    spark.sql("create table gold.m_grown (id bigint) using delta")
    spark.sql("create table gold.m_quiet (id bigint) using delta")
    for n in range(3):
        spark.sql(f"insert into gold.m_grown values ({n})")
    spark.sql("insert into gold.m_quiet values (7)")
    quiet_version = latest_version(spark, "gold.m_quiet")
    growth = FileGrowth(threshold=3)
    lines: list[str] = []

    assert compact_grown_tables(spark, growth, log=lines.append) == {"gold.m_grown": (3, 1)}
    assert lines == ["compacted gold.m_grown: 3 files into 1 (3 before)"]
    assert sorted(r.id for r in spark.table("gold.m_grown").collect()) == [0, 1, 2]
    assert latest_version(spark, "gold.m_quiet") == quiet_version

    for n in (3, 4):
        spark.sql(f"insert into gold.m_grown values ({n})")
        assert compact_grown_tables(spark, growth, log=lines.append) == {}
    spark.sql("insert into gold.m_grown values (5)")
    assert compact_grown_tables(spark, growth, log=lines.append) == {"gold.m_grown": (4, 1)}
    assert sorted(r.id for r in spark.table("gold.m_grown").collect()) == [0, 1, 2, 3, 4, 5]
