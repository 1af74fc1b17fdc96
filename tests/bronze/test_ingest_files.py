"""The real ingest over landing files: good lines land, bad ones are quarantined, nothing twice."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.bronze.ingest import LandingError, ingest
from pyspark_jobs.bronze.landing_records import NOT_JSON
from pyspark_jobs.config import load_config
from pyspark_jobs.settings import Settings
from pyspark_jobs.storage import remove_unregistered_new_table
from tests.bronze.conftest import (
    bronze_rows,
    landing_config,
    quarantine_rows,
    record_line,
    write_config,
)
from tests.support.killed_creation import leave_killed_creation

DEEP = 1500


def test_valid_lines_land_and_malformed_lines_are_quarantined(
    spark: SparkSession, empty_lake: Settings, tmp_path: Path
) -> None:
    config, landing = landing_config(tmp_path)
    good = [
        record_line("db.orders", 0, 0, {"op": "c", "after": {"id": 1}}, {"id": 1}),
        record_line("db.orders", 0, 1, None, {"id": 1}),  # tombstone
        record_line("db.orders", 1, 0, '{"op":"u"}', "k2"),  # string-encoded value
    ]
    bad = {
        b"not json": NOT_JSON,
        b'{"topic":"db.orders","partition":0,"offset":2,"value":{"op":': NOT_JSON,
        b"\x00\xff\xfe\x9c garbage \x81": "invalid UTF-8 at byte 1 of the line",
        b'{"topic":"db.orders","value":"' + b"x" * (5 * 1024 * 1024): NOT_JSON,
        b'{"topic":"db.orders","partition":0,"offset":3,"value":'
        + b"[" * DEEP + b"]" * DEEP + b"}": NOT_JSON,
        b'{"topic":"db.orders","partition":0,"offset":4,"key":null}': "missing field: value",
        b'{"topic":"db.orders","partition":"abc","offset":5,"value":"v"}':
            "partition is not an integer",
    }  # fmt: skip
    lines = [good[0].encode(), *list(bad)[:4], good[1].encode(), *list(bad)[4:], good[2].encode()]
    (landing / "mixed.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    logged: list[str] = []

    [report] = ingest(spark, empty_lake, config, log=logged.append)

    assert bronze_rows(spark, "files") == sorted(
        [
            ("db.orders", 0, 0, '{"id":1}', '{"op":"c","after":{"id":1}}'),
            ("db.orders", 0, 1, '{"id":1}', None),
            ("db.orders", 1, 0, "k2", '{"op":"u"}'),
        ],
        key=repr,
    )
    # raw keeps the line as text; a line that is not UTF-8 as the base64 of its bytes
    expected_bad = sorted(
        ((reason, _text_or_base64(raw)) for raw, reason in bad.items()),
        key=repr,
    )
    assert quarantine_rows(spark, "files") == expected_bad
    assert (report.read, report.landed, report.quarantined) == (10, 3, 7)
    assert logged == [
        "bronze: small landing files, planned without code generation",
        "bronze files: batch 0: read 10, landed 3, quarantined 7",
    ]

    # caught up: a second run reads nothing; a new file lands alone
    [again] = ingest(spark, empty_lake, config, log=logged.append)
    assert (again.read, len(again.batches)) == (0, 0)
    watermark = _versions(spark).agg(F.max("v")).first()[0]
    (landing / "more.jsonl").write_text(record_line("db.orders", 0, 9, {"op": "d"}) + "\n")
    [more] = ingest(spark, empty_lake, config, log=logged.append)
    assert (more.read, more.landed) == (1, 1)
    assert len(bronze_rows(spark, "files")) == 4
    # silver's incremental read: rows whose row-tracking commit version is past its watermark
    new = _versions(spark).where(F.col("v") > watermark).select("offset", "value").collect()
    assert [tuple(r) for r in new] == [(9, '{"op":"d"}')]


def _text_or_base64(line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(line).decode()


def _versions(spark: SparkSession) -> DataFrame:
    """Bronze rows with the commit version silver uses as its watermark (as in dbt)."""
    return spark.table("bronze.cdc_raw").select(
        "offset", "value", F.col("_metadata.row_commit_version").alias("v")
    )


def test_a_query_killed_writing_its_first_offsets_starts_again(
    spark: SparkSession, empty_lake: Settings, tmp_path: Path
) -> None:
    """Found by the crash drill: a kill inside a new query's first offsets write left
    `offsets/.0.<uuid>.tmp` (and its checksum), and every later ingest of the source
    failed with STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY. The next ingest lands the
    file; a committed offsets entry is never touched."""
    config, landing = landing_config(tmp_path)
    (landing / "a.jsonl").write_text(record_line("db.orders", 0, 0, {"op": "c"}, {"id": 1}) + "\n")
    offsets = Path(empty_lake.checkpoint_dir) / "bronze" / "files" / "offsets"
    offsets.mkdir(parents=True)
    (offsets / ".0.a8671807-9896-43a9-9c5e-c714aec81bf3.tmp").write_bytes(b"")
    (offsets / "..0.a8671807-9896-43a9-9c5e-c714aec81bf3.tmp.crc").write_bytes(b"")

    [report] = ingest(spark, empty_lake, config, log=lambda _: None)

    assert report.landed == 1
    assert bronze_rows(spark, "files") == [("db.orders", 0, 0, '{"id":1}', '{"op":"c"}')]
    assert sorted(p.name for p in offsets.iterdir()) == [".0.crc", "0"]


def test_a_table_killed_between_its_creation_and_its_registration_is_created_again(
    spark: SparkSession, empty_lake: Settings, tmp_path: Path
) -> None:
    """Found by the crash drill (seed 306140404): a kill after `create table` committed
    bronze.cdc_raw's first Delta version and before the catalog registered it, and every
    later ingest failed with DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION."""
    config, landing = landing_config(tmp_path)
    (landing / "a.jsonl").write_text(record_line("db.orders", 0, 0, {"op": "c"}, {"id": 1}) + "\n")
    leave_killed_creation(spark, "bronze.cdc_raw")

    [report] = ingest(spark, empty_lake, config, log=lambda _: None)

    assert report.landed == 1
    assert bronze_rows(spark, "files") == [("db.orders", 0, 0, '{"id":1}', '{"op":"c"}')]


def test_an_unregistered_table_folder_with_data_is_left_alone(
    spark: SparkSession, empty_lake: Settings
) -> None:
    spark.sql("create database if not exists bronze")
    location = f"{spark.catalog.getDatabase('bronze').locationUri}/cdc_raw"
    spark.createDataFrame([("a",)], "source string").write.format("delta").save(location)

    assert not remove_unregistered_new_table(spark, "bronze.cdc_raw")
    assert spark.read.format("delta").load(location).count() == 1


def test_a_source_that_cannot_be_read_fails_the_run_before_any_source_starts(
    spark: SparkSession, empty_lake: Settings, tmp_path: Path
) -> None:
    """The sources are made ready together, then started: one whose landing folder is a
    file stops the run with its error, and no other source has read anything (each run
    lands all of its sources or none, so the next one is not half done)."""
    good = tmp_path / "landing" / "good"
    good.mkdir(parents=True)
    (good / "a.jsonl").write_text(record_line("db.t", 0, 0, {"op": "c"}, {"id": 1}) + "\n")
    not_a_folder = tmp_path / "landing" / "bad"
    not_a_folder.write_text("I am a file\n")
    config = load_config(
        write_config(
            tmp_path,
            [{"name": "good", "landing": str(good)}, {"name": "bad", "landing": str(not_a_folder)}],
        )
    )

    with pytest.raises(LandingError, match="'bad'.* is not a folder"):
        ingest(spark, empty_lake, config, log=lambda _: None)

    assert bronze_rows(spark, "good") == []
    assert not spark.streams.active
    # Read once the folder is fixed, as a first run would.
    good_only = load_config(
        write_config(tmp_path / "fixed", [{"name": "good", "landing": str(good)}])
    )
    ingest(spark, empty_lake, good_only, log=lambda _: None)
    assert bronze_rows(spark, "good") == [("db.t", 0, 0, '{"id":1}', '{"op":"c"}')]
