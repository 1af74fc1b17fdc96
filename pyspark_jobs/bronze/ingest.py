"""Bronze ingest job: Structured Streaming from each source into ``bronze.cdc_raw``.

Exactly-once: the stream's checkpoint fixes which files/offsets make up each micro-batch
(the offset log is written before the batch runs), and each batch is written with Delta's
idempotent-write options (``txnAppId`` + ``txnVersion`` = batch id), so a batch replayed
after a crash is skipped by Delta instead of being appended twice.

A landing source with no file its checkpoint has not read starts no query at all
(``landing_listing``): starting one only to find nothing costs seconds per source.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from pyspark_jobs.bronze.landing_listing import (
    Listing,
    list_landing,
    nothing_new,
    record_signature,
)
from pyspark_jobs.bronze.progress import (
    BatchCounts,
    SourceIngest,
    new_lines,
    remaining_lines,
)
from pyspark_jobs.bronze.readers import read_kafka, read_landing_files
from pyspark_jobs.bronze.tables import (
    QUARANTINE_TABLE,
    RAW_TABLE,
    RECORD_COLUMNS,
    ensure_bronze_tables,
)
from pyspark_jobs.config import LakehouseConfig, Source
from pyspark_jobs.locks import named_locks
from pyspark_jobs.settings import Settings, join_location
from pyspark_jobs.small_inputs import files_small, interpreted_if
from pyspark_jobs.storage import read_text, remove_unfinished_log_writes, write_once

__all__ = ["LandingError", "SourceIngest", "ingest", "ingest_locks"]

# How often the driver looks at the queries for new progress (seconds).
_POLL_SECONDS = 1
# Building a source's stream is about two thousand py4j calls (the landing parser's
# expressions): a second or more per source, mostly the driver waiting on the JVM, so the
# sources are built a few at a time, beside the bronze tables' creation (seconds on a new
# lake, whose metastore starts then).
PREPARE_THREADS = 4


class LandingError(RuntimeError):
    """A source's landing folder cannot be used."""


def _app_id(spark: SparkSession, checkpoint: str) -> str:
    """A stable id for the checkpoint, used as Delta's ``txnAppId``.

    It lives inside the checkpoint: resetting the checkpoint resets the id too, so a
    re-read from scratch is written rather than silently skipped as already committed.
    Written whole or not at all (``storage.write_once``), so a kill never leaves an empty
    id behind.
    """
    id_file = join_location(checkpoint, "lakehouse_app_id")
    write_once(spark, id_file, uuid.uuid4().hex)
    text = read_text(spark, id_file)
    assert text is not None
    return text.strip()


@contextmanager
def ingest_locks(
    settings: Settings,
    sources: Sequence[Source],
    spark: Callable[[], SparkSession] | None = None,
) -> Iterator[None]:
    """Hold every chosen source's ingest lock, or raise ``LockBusy`` at once.

    With host locks (a lake folder) they are taken before the Spark session starts (see
    ``cli.cmd_ingest``): the embedded Derby metastore admits one JVM, so a second ingest
    must refuse before it boots one. Lake locks (hosts sharing the lake) are rows of a
    Delta table, so they need the session: ``spark`` gives it on demand.
    """

    def no_session() -> SparkSession:
        raise RuntimeError("lake locks need a Spark session: pass spark to ingest_locks")

    with named_locks(
        settings,
        [f"ingest-{source.name}" for source in sources],
        lambda name: f"an ingest of source {name.removeprefix('ingest-')!r}",
        spark or no_session,
    ):
        yield


def chosen_sources(config: LakehouseConfig, source_names: Sequence[str] = ()) -> list[Source]:
    """The named sources (all by default); an unknown name is a ``ConfigError``."""
    return [config.source(n) for n in source_names] if source_names else list(config.sources)


def _batch_writer(
    source: Source, app_id: str, report: SourceIngest
) -> Callable[[DataFrame, int], None]:
    def write_batch(batch: DataFrame, batch_id: int) -> None:
        stamped = batch.select(
            F.lit(source.name).alias("source"),
            F.lit(source.format).alias("format"),
            "*",
            F.current_timestamp().alias("ingested_at"),
            F.lit(batch_id).cast("bigint").alias("batch_id"),
        ).withColumn("ingest_date", F.to_date("ingested_at"))
        stamped = stamped.persist()
        try:
            # One pass for both counts; a table with nothing to add gets no commit.
            counted = stamped.agg(
                F.count(F.lit(1)).alias("read"),
                F.count_if(F.col("problem").isNotNull()).alias("quarantined"),
            ).first()
            assert counted is not None
            quarantined = int(counted["quarantined"])
            landed = int(counted["read"]) - quarantined
            good = stamped.where(F.col("problem").isNull()).select(
                "source", "format", *RECORD_COLUMNS, "ingested_at", "batch_id", "ingest_date"
            )
            bad = stamped.where(F.col("problem").isNotNull()).select(
                "source",
                "format",
                F.col("problem").alias("reason"),
                "raw",
                "topic",
                "partition",
                "offset",
                "landing_file",
                "ingested_at",
                "batch_id",
                "ingest_date",
            )
            for frame, table, suffix, rows in (
                (good, RAW_TABLE, "raw", landed),
                (bad, QUARANTINE_TABLE, "q", quarantined),
            ):
                if not rows:
                    continue
                (
                    frame.write.format("delta")
                    .mode("append")
                    .option("txnAppId", f"{app_id}-{suffix}")
                    .option("txnVersion", batch_id)
                    .saveAsTable(table)
                )
        finally:
            stamped.unpersist()
        report.batches[batch_id] = BatchCounts(landed + quarantined, landed, quarantined)

    return write_batch


def _check_landing(source: Source) -> None:
    """Raise ``LandingError`` unless the source's landing folder is (or can be made) readable."""
    assert source.landing is not None
    if source.landing.exists() and not source.landing.is_dir():
        raise LandingError(f"source {source.name!r}: landing {source.landing} is not a folder")
    try:
        source.landing.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LandingError(
            f"source {source.name!r}: cannot create landing folder {source.landing}: {exc}"
        ) from exc
    if not os.access(source.landing, os.R_OK | os.X_OK):
        raise LandingError(f"source {source.name!r}: landing folder {source.landing} is unreadable")


def _stream(spark: SparkSession, source: Source, max_per_batch: int) -> DataFrame:
    if source.landing is None:
        return read_kafka(spark, source, max_per_batch)
    return read_landing_files(spark, source, max_per_batch)


@dataclass(frozen=True)
class _Prepared:
    """A source made ready to start: its stream, or None when it has nothing new."""

    checkpoint: str
    stream: DataFrame | None
    # The landing listing taken before its query starts: its signature is stored once
    # every query ended, its bytes are the most the query can read. None: not known.
    listing: Listing | None


def _prepare(
    spark: SparkSession,
    settings: Settings,
    source: Source,
    max_per_batch: int,
    every_seconds: float | None,
) -> _Prepared:
    checkpoint = join_location(settings.checkpoint_dir, "bronze", source.name)
    listing = None
    if source.landing is not None:
        _check_landing(source)
        # --every's queries never end on their own, so they never store one, and what
        # they will read is not known.
        listing = list_landing(source.landing) if every_seconds is None else None
        if listing is not None and nothing_new(checkpoint, listing.signature):
            return _Prepared(checkpoint, None, listing)
    # A kill inside the query's first offsets write leaves a temp file that fails every
    # later start; the source's lock keeps other queries off it.
    remove_unfinished_log_writes(spark, checkpoint)
    return _Prepared(checkpoint, _stream(spark, source, max_per_batch), listing)


def _wait(
    queries: Sequence[tuple[StreamingQuery, SourceIngest]],
    log: Callable[[str], None],
    stop: threading.Event,
) -> None:
    """Wait for every query to end (or ``stop``), printing each batch's line as it appears.

    Every query is checked on each pass, so one source failing ends the run even while
    another (``--every``) would run forever.
    """
    pending = [query for query, _ in queries]
    while pending:
        if stop.is_set():
            log("bronze: stop requested, stopping after the batch in flight")
            for query in pending:
                query.stop()
            pending = []
            continue
        pending[0].awaitTermination(_POLL_SECONDS)
        for query, report in queries:
            for line in new_lines(report, query.recentProgress):
                log(line)
        for query in list(pending):
            if not query.isActive:
                query.awaitTermination()  # raises the query's error, if it failed
                pending.remove(query)
    for _, report in queries:
        for line in remaining_lines(report):
            log(line)


def ingest(
    spark: SparkSession,
    settings: Settings,
    config: LakehouseConfig,
    source_names: Sequence[str] = (),
    every_seconds: float | None = None,
    max_per_batch: int = 1000,
    log: Callable[[str], None] = print,
    take_locks: bool = True,
    stop: threading.Event | None = None,
) -> list[SourceIngest]:
    """Land every new record of the chosen sources (all by default) in bronze.

    Without ``every_seconds`` it processes what is there and returns (safe for cron);
    with it, it keeps running with a processing-time trigger until interrupted.
    Raises ``LockBusy`` when another ingest of one of the sources is running (pass
    ``take_locks=False`` when the caller already holds ``ingest_locks``). Setting
    ``stop`` ends the run after the batches in flight (how ``--every`` ends on SIGTERM).

    Without ``every_seconds``, a landing source whose folder lists the same files as when
    its last completed run started starts no query (``landing_listing``): its report is
    ``skipped``, with nothing read.
    """
    sources = chosen_sources(config, source_names)
    reports = [SourceIngest(s.name) for s in sources]
    stop = stop or threading.Event()
    # (checkpoint, listing signature taken before its query started) to store once every
    # query has ended on its own.
    listings: list[tuple[str, str]] = []
    with ExitStack() as stack:
        if take_locks:
            stack.enter_context(ingest_locks(settings, sources, lambda: spark))
        with ThreadPoolExecutor(max_workers=PREPARE_THREADS) as pool:
            tables = pool.submit(ensure_bronze_tables, spark)
            preparing = [
                pool.submit(_prepare, spark, settings, source, max_per_batch, every_seconds)
                for source in sources
            ]
        tables.result()
        # Nothing has started yet: a source that cannot be read fails the run here.
        prepared = [future.result() for future in preparing]
        started: list[tuple[StreamingQuery, SourceIngest]] = []
        try:
            # Each query plans its batches with the settings of the session at its start.
            reading = [
                ready.listing.total_bytes if ready.listing else None
                for ready in prepared
                if ready.stream is not None
            ]
            with interpreted_if(
                spark, files_small(spark, reading), "bronze", log, inputs="small landing files"
            ):
                for source, report, ready in zip(sources, reports, prepared, strict=True):
                    checkpoint = ready.checkpoint
                    if ready.stream is None:
                        report.skipped = True
                        log(f"bronze {source.name}: no new landing files, stream not started")
                        continue
                    if ready.listing is not None:
                        listings.append((checkpoint, ready.listing.signature))
                    # Started one by one: foreachBatch sets up PySpark's callback server on
                    # first use, without a lock.
                    writer = (
                        ready.stream.writeStream.queryName(f"bronze_{source.name}")
                        .option("checkpointLocation", checkpoint)
                        .foreachBatch(_batch_writer(source, _app_id(spark, checkpoint), report))
                    )
                    if every_seconds is None:
                        writer = writer.trigger(availableNow=True)
                    else:
                        writer = writer.trigger(processingTime=f"{every_seconds} seconds")
                    started.append((writer.start(), report))
            _wait(started, log, stop)
        finally:
            for query, _ in started:
                if query.isActive:
                    query.stop()
        # _wait returned, so no query failed; one stopped on request may not have read all.
        if not stop.is_set():
            for checkpoint, listing in listings:
                record_signature(checkpoint, listing)
    return reports
