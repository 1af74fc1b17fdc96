"""A Delta table's current version, id, size, whether it holds files, newly added files
and rows (in all and per partition), read from its log through the JVM.

``DeltaLog.update`` lists the table's log for new commits and returns the current
snapshot: no Spark job, the same on a lake URI, and the snapshot every later scan of the
table in this process starts from. ``describe history`` answers the same question with a
Spark query per table: on the samples' lake, 4.5 s for four tables in a new process
against 0.4 s here (1.5 s against 0.3 s once warm).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.catalog import kept_lookup, table_identifier


def _delta_log(spark: SparkSession, table: str) -> Any:
    """The JVM ``DeltaLog`` of the catalog table ``table`` (kept within a run: finding it
    is a metastore call and the table's location parsed, and only a drop changes it)."""
    delta_log = spark._jvm.org.apache.spark.sql.delta.DeltaLog  # type: ignore[union-attr]
    return kept_lookup(
        table,
        "delta log",
        lambda: delta_log.forTable(spark._jsparkSession, table_identifier(spark, table)),
    )


def current_snapshot(spark: SparkSession, table: str) -> Any:
    """The JVM snapshot of the catalog table ``table``, brought up to date."""
    log = _delta_log(spark, table)
    # Scala's default arguments, spelled out for py4j: no staleness allowed.
    return log.update(
        getattr(log, "update$default$1")(),
        getattr(log, "update$default$2")(),
        getattr(log, "update$default$3")(),
    )


def latest_version(spark: SparkSession, table: str) -> int:
    """The table's current Delta version."""
    return int(current_snapshot(spark, table).version())


def version_with_id(spark: SparkSession, table: str) -> str:
    """``"<table id>@<version>"``: a table dropped and created again never compares equal."""
    snapshot = current_snapshot(spark, table)
    return f"{snapshot.metadata().id()}@{snapshot.version()}"


def table_bytes(spark: SparkSession, table: str) -> int | None:
    """The size of the table's current files, from the checksum Delta writes beside each
    commit (``<version>.crc``); None when there is none (``Snapshot.sizeInBytes`` would
    compute it with Spark jobs)."""
    checksum = current_snapshot(spark, table).checksumOpt()
    return int(checksum.get().tableSizeBytes()) if checksum.isDefined() else None


def data_files(spark: SparkSession, table: str) -> int | None:
    """The number of data files of the table's current version, from its commit's
    checksum; None when there is none."""
    checksum = current_snapshot(spark, table).checksumOpt()
    return int(checksum.get().numFiles()) if checksum.isDefined() else None


def holds_files(spark: SparkSession, table: str) -> bool:
    """False when the table's checksum says it has no data file (so no row): a scan of it
    would cost a file-listing job for nothing. True when it has files, or no checksum."""
    return data_files(spark, table) != 0


@dataclass(frozen=True)
class AddedFile:
    """A data file a commit added: its partition values and its column statistics (the
    JSON Delta writes beside it, None when it wrote none)."""

    partition_values: dict[str, str | None]
    stats: str | None

    def min_value(self, column: str) -> Any:
        """The least value of ``column`` in the file by its statistics, None if unknown."""
        return json.loads(self.stats).get("minValues", {}).get(column) if self.stats else None

    def records(self) -> int | None:
        """The file's row count by its statistics, None if unknown."""
        count = json.loads(self.stats).get("numRecords") if self.stats else None
        return None if count is None else int(count)


def files_added_since(
    spark: SparkSession, table: str, version: int, max_commits: int = 500
) -> list[AddedFile] | None:
    """The data files the commits after ``version`` added, read from the table's commit
    files (no Spark job; files that only rewrite rows, such as OPTIMIZE's, do not count).
    None when it cannot be told cheaply: more than ``max_commits`` commits, or their
    files already cleaned from the log."""
    snapshot = current_snapshot(spark, table)
    if snapshot.version() - version > max_commits:
        return None
    if snapshot.version() <= version:
        return []
    added: list[AddedFile] = []
    try:
        for _, action in _actions_after(spark, table, version):
            if action.getClass().getSimpleName() != "AddFile" or not action.dataChange():
                continue
            values: dict[str, str | None] = {}
            pairs = action.partitionValues().iterator()
            while pairs.hasNext():
                pair = pairs.next()
                values[str(pair._1())] = None if pair._2() is None else str(pair._2())
            added.append(AddedFile(values, action.stats()))
    except Exception:  # noqa: BLE001 - unknown: the caller reads everything
        return None
    return added


def _actions_after(spark: SparkSession, table: str, version: int) -> Iterator[tuple[int, Any]]:
    """(commit version, JVM action) of every commit after ``version``, from the commit
    files; raises when one of them was already cleaned from the log."""
    log = _delta_log(spark, table)
    # failOnDataLoss: a commit file already cleaned up raises instead of being skipped.
    changes = log.getChanges(version + 1, getattr(log, "getChanges$default$2")(), True)
    while changes.hasNext():
        commit = changes.next()
        committed = int(commit._1())
        actions = commit._2().iterator()
        while actions.hasNext():
            yield committed, actions.next()


def _partitions_by(metadata: Any, column: str) -> bool:
    """Whether ``column`` partitions the table and its files name it so (with column
    mapping the file list names partitions by physical names)."""
    return metadata.columnMappingMode().name() == "none" and bool(
        metadata.partitionColumns().contains(column)
    )


def rows_per_partition(spark: SparkSession, table: str, column: str) -> dict[str, int] | None:
    """Live rows of ``table`` per value of its partition column ``column``, from the record
    count Delta writes in each file's statistics, less the rows its deletion vector
    removes: one job over the snapshot's file list, which the session keeps in memory, and
    no data file read. None when that cannot be told: ``column`` is not a partition
    column, the table maps column names, or a file has no record count."""
    snapshot = current_snapshot(spark, table)
    if not _partitions_by(snapshot.metadata(), column):
        return None
    rows = _live_rows(spark, snapshot, F.col("partitionValues")[column])
    return None if rows is None else {str(value): n for value, n in rows}


# What a commit that only appends rows holds besides the files it adds: its own record,
# a streaming writer's idempotency marker, and the row-tracking watermark (a domain).
_BESIDE_APPENDS = {"CommitInfo", "SetTransaction", "DomainMetadata"}


def appended_rows_since(
    spark: SparkSession, table: str, column: str, version: int, up_to: int
) -> dict[str, int] | None:
    """Rows per value of the partition column ``column`` that the commits after
    ``version`` up to ``up_to`` added, from their files' record counts (no Spark job),
    when every one of those commits only appended: files added as new data with a record
    count and no deletion vector, none removed, no change of schema or protocol. None
    when that cannot be told so (a delete, an OPTIMIZE, a commit cleaned from the log,
    ``column`` not a partition column or the table mapping column names)."""
    if not _partitions_by(current_snapshot(spark, table).metadata(), column):
        return None
    added: dict[str, int] = {}
    seen = version
    try:
        for seen, action in _actions_after(spark, table, version):
            if seen > up_to:
                break
            kind = action.getClass().getSimpleName()
            if kind in _BESIDE_APPENDS:
                continue
            if kind != "AddFile" or not action.dataChange() or action.deletionVector():
                return None
            records = json.loads(action.stats() or "{}").get("numRecords")
            if records is None:
                return None
            value = action.partitionValues().get(column)
            key = str(value.get()) if value.isDefined() and value.get() is not None else "None"
            added[key] = added.get(key, 0) + int(records)
    except Exception:  # noqa: BLE001 - unknown: the caller counts again
        return None
    return added if seen >= up_to else None


def row_count(spark: SparkSession, table: str) -> int | None:
    """Live rows of ``table``, counted as ``rows_per_partition`` counts them (one job over
    the file list, no data file read); None when a file has no record count."""
    rows = _live_rows(spark, current_snapshot(spark, table), F.lit(None))
    return None if rows is None else sum(n for _, n in rows)


def _live_rows(spark: SparkSession, snapshot: Any, group: Column) -> list[tuple[Any, int]] | None:
    """(group value, live rows) over the snapshot's files, from their statistics; None
    when a file has none."""
    files = DataFrame(snapshot.allFiles().toDF(), spark)
    records = F.get_json_object("stats", "$.numRecords").cast("long")
    deleted = F.coalesce(F.col("deletionVector.cardinality"), F.lit(0))
    rows = (
        files.groupBy(group.alias("value"))
        .agg(
            F.sum(records - deleted).alias("rows"),
            F.count_if(records.isNull()).alias("uncounted"),
        )
        .collect()
    )
    if any(r["uncounted"] for r in rows):
        return None
    return [(r["value"], int(r["rows"])) for r in rows]
