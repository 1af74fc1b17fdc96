"""The silver step: publish the declared entities, then ``dbt build`` the silver models
(and their data tests), when there is something to do.

The step builds the models tagged ``pipeline`` in dbt_project.yml (staging, intermediate,
silver), not the marts: they read gold, which the pipeline writes after silver. A failing
data test fails the step (``DbtTestsFailed``), after its model was built: the run stops
before the silver gate and gold. Unit tests are left out: they test the models' SQL on
fixed rows, which changes only with the project (``make test`` and an analyst's
``dbt build`` run them), and would cost every pipeline run seconds.

A dbt build costs seconds even when bronze holds nothing new (parsing, the staging views
recreated, each incremental model's queries, the tests), so a pipeline cycle that brought
nothing would pay it for nothing. The declared entities are published only when they
changed (``entity_registry``), and each successful build is recorded in
``lakehouse.silver_builds`` with the bronze version it read, a fingerprint of the dbt
project's files and the versions of the silver tables it left, tested (a continuous run
keeps the newest record in memory while that table has no other commit than its own:
``version_memo``):

- same bronze version, fingerprint and silver versions as the last build, same entities:
  nothing to do;
- same fingerprint, newer bronze, new entities, or silver tables written since (a failed
  build, an analyst's ``dbt build``, a hand edit, ``lakehouse maintain``): only the
  incremental models run, with their tests (the staging and intermediate views are defined
  by the same SQL and read the entities at query time, so they are still current);
- anything else (first build, a changed model or macro, ``--full-refresh``): every
  pipeline model is built.

So the data tests pass on silver as it is whenever the step skips: a test that failed
runs again in every later run until it passes.

The keyed view unions the staging models of the formats the config's sources use (dbt var
``cdc_formats``), not of every format: planning the union costs seconds per format in
each model that reads it. That set is part of the build's fingerprint, so a config that
starts using a new format rebuilds the views. An analyst's own ``dbt build`` keeps the
project's default (every format): correct, only slower.

An incremental build reads only what bronze landed since the last build (``new_bronze``,
from bronze's log, no Spark job). The dbt var ``batch_formats`` names the formats that got
rows when not all did, and on a large bronze the environment variable ``SINCE_MS_ENV``
bounds the rows' ``ingested_at`` from below (the least of the new files' statistics), so
Delta skips the older files (passed with ``batch_formats``, which then names every
format), with ``AFTER_VERSION_ENV``, which keeps exactly the rows landed since. On a
change log as the last build left it, ``SOURCES_ENV`` names the sources that got rows:
the log's reads of itself (the anti join on ``change_id``, the ``unique`` test) read
only their partitions (``_batch_sources``).
``batch_formats`` makes the keyed model ephemeral: inlined over those formats' staging
models, read from that moment on; the stored view is left as the last full build made
it. Planning the keyed view over every format is most of a small build (a batch of 100
Debezium changes on the samples' lake, warm: the two models 11 s, against 3 to 4 s over
Debezium alone).

Both silver models read the keyed changes, one the valid ones and the other the rejects,
so a full build (var ``pipeline_build``) first stores them once in ``BATCH_TABLE``
(``int_change_log__batch``) and the two models read that small table: the keyed view is
planned and run once instead of twice (the samples' first dbt build 36 s -> 22 s). So does
an incremental build of more than ``STORE_BATCH_ABOVE_ROWS`` new bronze rows (the
environment variable ``STORE_BATCH_ENV`` makes the batch model a table, and the build
selects it): there parsing the batch is most of the build. A smaller incremental build
inlines the batch model into each silver model: with the table, a build of a few rows
cost the same (the table's write against one planning saved), and the two models' inserts
became so short that the test of a build losing a commit race to another writer
(``test_a_build_that_loses_a_commit_race...``) no longer met the race on CI.

On a shared metastore an analyst's ``dbt run`` may build the same silver tables at the
same time. Delta lets one commit win and fails the other (``DELTA_CONCURRENT_APPEND``);
no change lands twice. When the pipeline's build is the loser, it builds again (up to
``COMMIT_RACE_ATTEMPTS`` times), so the analyst never stops the pipeline.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.bronze.tables import RAW_TABLE
from pyspark_jobs.catalog import table_exists
from pyspark_jobs.config import LakehouseConfig
from pyspark_jobs.delta_log import files_added_since, holds_files, latest_version, table_bytes
from pyspark_jobs.settings import PROJECT_ROOT, Settings
from pyspark_jobs.silver.dbt_runner import DbtFailed, lost_a_commit_race, run_dbt
from pyspark_jobs.silver.entity_registry import publish_entities
from pyspark_jobs.small_inputs import interpreted_when_small
from pyspark_jobs.storage import clear_killed_creation
from pyspark_jobs.version_memo import memoized, own_commit

BUILDS_TABLE = "lakehouse.silver_builds"
# The keyed changes of a build, stored once for both silver models
# (models/intermediate/int_change_log__batch.sql).
BATCH_TABLE = "staging.int_change_log__batch"
SILVER_TABLES = ("silver.change_log", "silver.change_log_rejects")
# What dbt builds from: a change to any of these may change what silver holds. The marts
# are analysts' models the pipeline does not build.
_PROJECT_FILES = ("dbt_project.yml", "profiles.yml", "models", "macros")
_NOT_PIPELINE = ("models/marts",)
# The pipeline's models (dbt_project.yml tags them), with their data tests.
PIPELINE_SELECTOR = "tag:pipeline"
# Without dbt's JSON artifacts (manifest.json, run_results.json, graph.gpickle): the
# pipeline reads its results in-process, and writing them cost about 0.2 s a build. The
# saved parse (partial_parse.msgpack) and the compiled SQL a failed test names are
# written all the same.
_BUILD = ["build", "--exclude-resource-type", "unit_test", "--no-write-json"]
# Bronze size above which an incremental build reads only the files landed since the last
# build (by their ingested_at statistics): below it, reading every file costs no more than
# the bound does (warm cycles with and without it, docs/architecture.md). Above it the
# saving outgrows that: on a 9 MiB bronze of 160,000 records, a build of a 2,400-record
# batch 71-78 s -> 54-55 s.
PRUNE_BRONZE_ABOVE_BYTES = 8 * 1024 * 1024
# The bounds of such a build reach dbt as environment variables, not vars: they change
# every build, and dbt parses the whole project again when a var changes, but only the
# files that read an environment variable when its value changes (a parse 4.0-4.7 s ->
# 1.9 s, docs/operations.md). Every build sets or unsets each of them.
SINCE_MS_ENV = "LAKEHOUSE_BATCH_INGESTED_SINCE_MS"
AFTER_VERSION_ENV = "LAKEHOUSE_BATCH_AFTER_BRONZE_VERSION"
# The sources with new bronze rows, quoted and comma-separated (SQL's list: source
# names are identifiers, config validation), set when the log is as the last
# build left it, tested: the change log's reads of its own rows (the anti join on
# change_id, the unique test) read only those sources' partitions (``_batch_sources``).
SOURCES_ENV = "LAKEHOUSE_BATCH_SOURCES"
# New bronze rows above which an incremental build, like a full one, stores the keyed
# batch once (``BATCH_TABLE``) for both silver models, which otherwise each parse and key
# it: on a large batch that parsing is most of the build, on a small one the table's write
# costs more than it saves (docs/performance.md, "A large batch keyed once").
STORE_BATCH_ABOVE_ROWS = 20_000
# Set (to any text) for such a build: the batch model reads it to be a table.
STORE_BATCH_ENV = "LAKEHOUSE_STORE_BATCH"
# Builds of one step before it gives up on commit races: a retry finds the winner's
# changes landed, so it loses again only if the other writer commits again meanwhile.
COMMIT_RACE_ATTEMPTS = 3


@dataclass(frozen=True)
class SilverBuild:
    """What a silver step did: ``full`` (every model), ``incremental`` (the incremental
    models only) or ``skipped`` (nothing new), and the bronze version it read."""

    kind: str
    bronze_version: int


def project_fingerprint(root: Path = PROJECT_ROOT) -> str:
    """A hash of the dbt project's files the pipeline's models are built from."""
    digest = hashlib.sha256()
    skipped = [root / name for name in _NOT_PIPELINE]
    for name in _PROJECT_FILES:
        path = root / name
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if any(file.is_relative_to(folder) for folder in skipped):
                continue
            digest.update(str(file.relative_to(root)).encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def build_fingerprint(formats: Sequence[str], root: Path = PROJECT_ROOT) -> str:
    """The project's fingerprint with the formats the keyed view unions."""
    text = f"{project_fingerprint(root)}|{','.join(formats)}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def used_formats(config: LakehouseConfig) -> list[str]:
    """The formats of the config's sources, in a stable order."""
    return sorted({source.format for source in config.sources})


@dataclass(frozen=True)
class NewBronze:
    """What bronze landed after the last build: its sources and their formats, a lower
    bound of its rows' ``ingested_at`` and how many rows it is (each None when a file has
    no statistics)."""

    formats: list[str]
    sources: list[str]
    ingested_since_ms: int | None
    rows: int | None = None


def new_bronze(
    spark: SparkSession, config: LakehouseConfig, bronze_version: int
) -> NewBronze | None:
    """What bronze landed after ``bronze_version`` (the last build's), from bronze's log;
    None when that is not known (any doubt: a source not in the config, a log too long or
    cleaned), and an incremental build then reads everything. Rows at or before that
    version were read by that build, so nothing outside it is new to silver."""
    files = files_added_since(spark, RAW_TABLE, bronze_version)
    if files is None:
        return None
    by_name = {source.name: source.format for source in config.sources}
    sources = {file.partition_values.get("source") or "" for file in files}
    if not sources <= by_name.keys():
        return None
    least = [_epoch_ms(file.min_value("ingested_at")) for file in files]
    known = [moment for moment in least if moment is not None]
    since = min(known) if known and len(known) == len(least) else None
    counts = [file.records() for file in files]
    rows = None if None in counts else sum(c for c in counts if c is not None)
    return NewBronze(sorted({by_name[name] for name in sources}), sorted(sources), since, rows)


def _epoch_ms(text: str | None) -> int | None:
    """Milliseconds since the epoch of a timestamp in Delta's statistics
    (``2026-11-27T03:34:41.123Z``), None when missing or unreadable."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return int(moment.timestamp() * 1000)


def _ensure_builds_table(spark: SparkSession) -> None:
    if table_exists(spark, BUILDS_TABLE):
        if "silver_versions" not in spark.table(BUILDS_TABLE).columns:
            # A lake from before the column: its builds read as unknown, so one more build
            # runs.
            spark.sql(f"alter table {BUILDS_TABLE} add columns (silver_versions string)")
        return
    spark.sql("create database if not exists lakehouse")
    clear_killed_creation(spark, BUILDS_TABLE)
    spark.sql(
        f"""
        create table if not exists {BUILDS_TABLE} (
            bronze_version bigint not null comment 'bronze.cdc_raw version the build read',
            fingerprint string not null comment 'the dbt project files',
            kind string not null comment 'full or incremental',
            built_at timestamp not null,
            silver_versions string comment 'the silver tables as the build left them, tested'
        ) using delta
        comment 'Successful silver builds: a cycle with nothing new skips dbt'
        """
    )


def _silver_versions(spark: SparkSession) -> str:
    """The Delta version of each silver table, as one comparable text."""
    return ",".join(f"{t}={latest_version(spark, t)}" for t in SILVER_TABLES)


# The name of the newest build in version_memo.
_NEWEST = "newest build"


def _last_build(spark: SparkSession) -> tuple[int, str, str | None] | None:
    """The newest build's bronze version, fingerprint and silver versions. Kept in this
    process while the table has no other commit than ``_record_build``'s
    (``version_memo``): a warm cycle does not read it again."""
    return memoized(spark, BUILDS_TABLE, _NEWEST, lambda: _read_last_build(spark))


def _read_last_build(spark: SparkSession) -> tuple[int, str, str | None] | None:
    if not holds_files(spark, BUILDS_TABLE):  # a new lake's: no query for no rows
        return None
    # One row: the newest build.
    row = (
        spark.table(BUILDS_TABLE)
        .orderBy(F.col("built_at").desc())
        .select("bronze_version", "fingerprint", "silver_versions")
        .first()
    )
    if row is None:
        return None
    return int(row["bronze_version"]), str(row["fingerprint"]), row["silver_versions"]


def build_silver(
    spark: SparkSession,
    settings: Settings,
    config: LakehouseConfig,
    full_refresh: bool = False,
    log: Callable[[str], None] = print,
    dbt_vars: Mapping[str, Any] | None = None,
) -> SilverBuild:
    """Bring silver up to date with bronze: every pipeline model, the incremental ones
    only, or nothing, as above, each built model with its data tests. ``dbt_vars`` are
    passed to dbt (the replay of rejects, ``silver/replay.py``): a build with vars always
    runs. Raises ``DbtTestsFailed`` when a data test fails and ``DbtFailed`` when dbt
    fails otherwise (the build is not recorded either way)."""
    _ensure_builds_table(spark)
    bronze = latest_version(spark, RAW_TABLE) if table_exists(spark, RAW_TABLE) else -1
    formats = used_formats(config)
    fingerprint = build_fingerprint(formats)
    new_entities = publish_entities(spark, config)
    last = None if full_refresh else _last_build(spark)
    built = all(table_exists(spark, t) for t in SILVER_TABLES)
    versions = _silver_versions(spark) if built and last is not None else None
    unchanged = built and last is not None and last == (bronze, fingerprint, versions)
    if unchanged and not new_entities and not dbt_vars:
        log(f"silver: nothing new since the last build (bronze version {bronze})")
        return SilverBuild("skipped", bronze)
    variables: dict[str, Any] = {"cdc_formats": formats, **(dbt_vars or {})}
    bounds: dict[str, str | None] = {
        SINCE_MS_ENV: None,
        AFTER_VERSION_ENV: None,
        SOURCES_ENV: None,
        STORE_BATCH_ENV: None,
    }
    if last is not None and last[1] == fingerprint and built:
        kind = "incremental"
        selected = [f"{PIPELINE_SELECTOR},config.materialized:incremental"]
        batch = None if dbt_vars else new_bronze(spark, config, last[0])
        narrowed, batch_bounds = _batch_narrowing(spark, batch, formats, last[0], log)
        variables.update(narrowed)
        bounds.update(batch_bounds)
        bounds.update(_batch_sources(batch, tested=last[2] == versions))
        if batch is not None and (batch.rows or 0) > STORE_BATCH_ABOVE_ROWS:
            bounds[STORE_BATCH_ENV] = "true"
            selected.append(BATCH_TABLE.split(".")[-1])
            log(f"silver: {batch.rows:,} new bronze rows: keying them once for both models")
        args = [*_BUILD, "--select", *selected, "--vars", json.dumps(variables)]
    else:
        kind = "full"
        variables["pipeline_build"] = True
        refresh = ["--full-refresh"] if full_refresh else []
        args = [*_BUILD, "--select", PIPELINE_SELECTOR, *refresh, "--vars", json.dumps(variables)]
    # In-process only: a Thrift Server plans dbt's queries in its own session.
    in_process = settings.dbt_target == "local"
    with (
        interpreted_when_small(spark, "silver", (RAW_TABLE, *SILVER_TABLES), log)
        if in_process
        else nullcontext()
    ):
        _run_dbt_winning_commit_races(settings, args, bounds, log)
    _record_build(spark, bronze, fingerprint, kind)
    return SilverBuild(kind, bronze)


def _record_build(spark: SparkSession, bronze: int, fingerprint: str, kind: str) -> None:
    """Append a successful build; its ``built_at`` (now) makes it the newest."""
    versions = _silver_versions(spark)
    with own_commit(spark, BUILDS_TABLE, _NEWEST, lambda _: (bronze, fingerprint, versions)):
        spark.createDataFrame(
            [(bronze, fingerprint, kind, versions)],
            "bronze_version bigint, fingerprint string, kind string, silver_versions string",
        ).select(
            "bronze_version",
            "fingerprint",
            "kind",
            F.current_timestamp().alias("built_at"),
            "silver_versions",
        ).write.format("delta").mode("append").saveAsTable(BUILDS_TABLE)


def _batch_narrowing(
    spark: SparkSession,
    batch: NewBronze | None,
    formats: Sequence[str],
    last_bronze_version: int,
    log: Callable[[str], None],
) -> tuple[dict[str, Any], dict[str, str]]:
    """What narrows an incremental build to what bronze landed since the last one (which
    read ``last_bronze_version``): the dbt var ``batch_formats`` when not every format got
    rows; when bronze is large enough for skipping its older files to matter, the bounds
    ``SINCE_MS_ENV`` (the least ``ingested_at`` of the new files) and
    ``AFTER_VERSION_ENV`` (the batch model keeps the rows landed after it), as
    environment variables. On a small bronze the batch model reads all rows of the
    batch's formats, and each silver model's watermark picks the new."""
    variables: dict[str, Any] = {}
    bounds: dict[str, str] = {}
    if batch is None or not batch.formats:
        return variables, bounds
    if batch.formats != list(formats):
        variables["batch_formats"] = batch.formats
        named = ", ".join(batch.formats)
        log(f"silver: new bronze rows of {named} only: the keyed model reads those")
    size = table_bytes(spark, RAW_TABLE)
    large = size is not None and size > PRUNE_BRONZE_ABOVE_BYTES
    if batch.ingested_since_ms is not None and large:
        # A second of slack below the file statistics' own (millisecond) truncation.
        bounds[SINCE_MS_ENV] = str(batch.ingested_since_ms - 1000)
        bounds[AFTER_VERSION_ENV] = str(last_bronze_version)
        # batch_formats is what inlines the keyed model, even when every format got rows.
        variables.setdefault("batch_formats", batch.formats)
        log("silver: reading bronze files landed since the last build only")
    return variables, bounds


def _batch_sources(batch: NewBronze | None, tested: bool) -> dict[str, str]:
    """``SOURCES_ENV`` when the build's new rows are known to come from ``batch``'s
    sources and the log is as the last build left it (``tested``: its data tests passed
    on it), else nothing.

    A change id includes its source, so a new change can equal only a logged change of
    its own source, and a duplicate can only appear within a source the build appends
    to: the anti join and the unique test read those partitions of the log and nothing
    else. After a build that failed (or any other writer), the tests read the whole log
    again, so a duplicate of any source is still found (and found again until it is
    gone)."""
    if batch is None or not batch.sources or not tested:
        return {}
    return {SOURCES_ENV: ", ".join(f"'{source}'" for source in batch.sources)}


def _run_dbt_winning_commit_races(
    settings: Settings,
    args: Sequence[str],
    environment: Mapping[str, str | None],
    log: Callable[[str], None],
) -> None:
    """``run_dbt``, again when its only failures were commits that another writer of the
    same silver table won (an analyst's ``dbt run`` through the same Thrift Server). The
    incremental models land each change once whoever commits first (the watermark and the
    anti join on ``change_id``), so the next attempt lands what the winner did not."""
    for attempt in range(1, COMMIT_RACE_ATTEMPTS + 1):
        try:
            run_dbt(settings, args, environment=environment)
            return
        except DbtFailed as failed:
            if attempt == COMMIT_RACE_ATTEMPTS or not lost_a_commit_race(failed):
                raise
            # The winner wrote the log: the next attempt tests all of it.
            environment = {**environment, SOURCES_ENV: None}
            lost = ", ".join(line.split(" ", 1)[0] for line in failed.failures)
            log(
                f"silver: another writer committed to silver first ({lost}: Delta's "
                f"concurrent-write conflict); building again, attempt {attempt + 1} of "
                f"{COMMIT_RACE_ATTEMPTS}"
            )
