"""Bronze ingest job: Structured Streaming from each source into ``bronze.cdc_raw``.

Exactly-once: the stream's checkpoint fixes which files/offsets make up each micro-batch,
and each batch is written with Delta's idempotent-write options (``txnAppId`` +
``txnVersion`` = batch id), so a batch replayed after a crash is skipped by Delta instead
of being appended twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.bronze.readers import read_kafka, read_landing_files
from pyspark_jobs.bronze.tables import (
    QUARANTINE_TABLE,
    RAW_TABLE,
    RECORD_COLUMNS,
    ensure_bronze_tables,
)
from pyspark_jobs.config import LakehouseConfig, Source
from pyspark_jobs.locks import exclusive_lock
from pyspark_jobs.settings import Settings


@dataclass
class SourceIngest:
    """What one source's ingest did in this run."""

    source: str
    batches: int = 0
    read: int = 0
    landed: int = 0
    quarantined: int = 0
    lag: list[int] = field(default_factory=list)


def _app_id(checkpoint: Path) -> str:
    """A stable id for the checkpoint, used as Delta's ``txnAppId``.

    It lives inside the checkpoint: resetting the checkpoint resets the id too, so a
    re-read from scratch is written rather than silently skipped as already committed.
    """
    checkpoint.mkdir(parents=True, exist_ok=True)
    id_file = checkpoint / "lakehouse_app_id"
    if not id_file.exists():
        id_file.write_text(uuid.uuid4().hex)
    return id_file.read_text().strip()


def _batch_writer(
    source: Source, app_id: str, report: SourceIngest, log: Callable[[str], None]
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
            for frame, table, suffix in ((good, RAW_TABLE, "raw"), (bad, QUARANTINE_TABLE, "q")):
                (
                    frame.write.format("delta")
                    .mode("append")
                    .option("txnAppId", f"{app_id}-{suffix}")
                    .option("txnVersion", batch_id)
                    .saveAsTable(table)
                )
            landed, quarantined = good.count(), bad.count()
        finally:
            stamped.unpersist()
        report.batches += 1
        report.read += landed + quarantined
        report.landed += landed
        report.quarantined += quarantined
        log(
            f"bronze {source.name}: batch {batch_id}: read {landed + quarantined}, "
            f"landed {landed}, quarantined {quarantined}"
        )

    return write_batch


def ingest(
    spark: SparkSession,
    settings: Settings,
    config: LakehouseConfig,
    source_names: Sequence[str] = (),
    every_seconds: float | None = None,
    max_per_batch: int = 1000,
    log: Callable[[str], None] = print,
) -> list[SourceIngest]:
    """Land every new record of the chosen sources (all by default) in bronze.

    Without ``every_seconds`` it processes what is there and returns (safe for cron);
    with it, it keeps running with a processing-time trigger until interrupted.
    Raises ``LockBusy`` when another ingest of one of the sources is running.
    """
    sources = [config.source(n) for n in source_names] if source_names else list(config.sources)
    ensure_bronze_tables(spark)
    reports = [SourceIngest(s.name) for s in sources]
    with ExitStack() as locks:
        for source in sources:
            locks.enter_context(
                exclusive_lock(
                    settings.state_dir / "locks" / f"ingest-{source.name}.lock",
                    f"an ingest of source {source.name!r}",
                )
            )
        queries = []
        for source, report in zip(sources, reports):
            checkpoint = settings.checkpoint_dir / "bronze" / source.name
            app_id = _app_id(checkpoint)
            if source.landing is not None:
                source.landing.mkdir(parents=True, exist_ok=True)
                stream = read_landing_files(spark, source, max_per_batch)
            else:
                stream = read_kafka(spark, source, max_per_batch)
            writer = (
                stream.writeStream.queryName(f"bronze_{source.name}")
                .option("checkpointLocation", str(checkpoint))
                .foreachBatch(_batch_writer(source, app_id, report, log))
            )
            if every_seconds is None:
                writer = writer.trigger(availableNow=True)
            else:
                writer = writer.trigger(processingTime=f"{every_seconds} seconds")
            queries.append(writer.start())
        try:
            for query in queries:
                query.awaitTermination()
        finally:
            for query in queries:
                if query.isActive:
                    query.stop()
    return reports

