"""``lakehouse maintain``: compact (OPTIMIZE) and clean (VACUUM) the lake's Delta tables.

Every table of a layer is compacted, then vacuumed. VACUUM deletes the files the current
version no longer uses that were removed longer ago than the table's
``delta.deletedFileRetentionDuration`` (Delta's retention of removed-file "tombstones",
one week unless set). That property is the one that counts: Delta 4 ignores a ``RETAIN n
HOURS`` other than 0 (``spark.databricks.delta.vacuum.retentionWindowIgnore.enabled``)
and refuses time travel and change-feed reads older than it. So the retention of a table
is what its property says, and where something still reads older versions, maintain
raises the property first (never lowers it):

- ``silver.change_log``: gold follows it through the change data feed from each table's
  last applied version (``lakehouse.gold_progress``). A change-feed read of version v
  needs the files added by every commit from v on, including those a later OPTIMIZE
  replaced; a file replaced at commit R was removed at R's time, after v's. So when the
  least advanced declared gold table's version is older than the retention (plus a
  margin), the retention becomes that age plus the retention again: every file gold has
  yet to read is kept, and gold keeps the slack it normally has to catch up before Delta
  refuses to read that far back.

- a gold table whose rebuild was cut short (``lakehouse.gold_rebuilds``): the rebuild is
  finished from the table's version before it (``gold/rebuild.py``), which must stay
  readable until then, in the same way.

Gold's own tombstones (``lakehouse.gold_tombstones``, ``gold.tombstone_retention_days``)
are rows of the current table, never old versions: no VACUUM removes them. Bronze's
streaming checkpoints live outside the tables (``<lake>/checkpoints``) and its
exactly-once writes are transaction ids in the Delta log, so VACUUM leaves both alone;
OPTIMIZE keeps bronze's row tracking (``_metadata.row_commit_version``, silver's
incremental watermark) as it was.

Metadata only, apart from the commands themselves: table details, history and the
commands' own metrics; no ``count()``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.catalog import table_exists
from pyspark_jobs.config import LakehouseConfig
from pyspark_jobs.delta_log import data_files
from pyspark_jobs.file_growth import FileGrowth
from pyspark_jobs.gold.change_feed import CHANGE_LOG_TABLE
from pyspark_jobs.gold.rebuild import REBUILDS_TABLE, unfinished_rebuilds
from pyspark_jobs.gold.staging import PENDING_TABLE
from pyspark_jobs.gold.tables import PROGRESS_TABLE, REJECTS_TABLE, TOMBSTONES_TABLE
from pyspark_jobs.session import temporary_conf
from pyspark_jobs.silver.build import BATCH_TABLE, BUILDS_TABLE
from pyspark_jobs.silver.entity_registry import ENTITIES_TABLE

LAYERS = ("bronze", "silver", "gold")
# Tables maintained at once (see ``maintain``).
THREADS = 4
# The pipeline's own state tables, maintained with the layer that writes them.
STATE_TABLES = {
    "bronze": (),
    # The batch table is rewritten by every full silver build: the files each replaced
    # accumulate until VACUUM (its retention is an hour: nothing reads old versions).
    "silver": (ENTITIES_TABLE, BUILDS_TABLE, BATCH_TABLE),
    "gold": (PROGRESS_TABLE, TOMBSTONES_TABLE, REJECTS_TABLE, PENDING_TABLE, REBUILDS_TABLE),
}
# Delta's default delta.deletedFileRetentionDuration (interval 1 week).
DEFAULT_RETENTION_HOURS = 168.0
# The least a reader of old versions is given beyond their age: commits land meanwhile.
MARGIN_HOURS = 1
RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"
_UNIT_HOURS = {
    "week": 168.0,
    "day": 24.0,
    "hour": 1.0,
    "minute": 1 / 60,
    "second": 1 / 3600,
    "millisecond": 1 / 3_600_000,
    "microsecond": 1 / 3_600_000_000,
}
_INTERVAL_PART = re.compile(r"(-?\d+(?:\.\d+)?)\s*([a-z]+?)s?\b")


@dataclass(frozen=True)
class Retention:
    """A table's deleted-file retention in whole hours, why, and the hours its property
    held before (``configured``; less than ``hours`` when maintain raises it)."""

    hours: int
    reason: str
    configured: float

    @property
    def raised(self) -> bool:
        return self.hours > self.configured


@dataclass(frozen=True)
class TableMaintenance:
    """What maintain did to one table (``dry_run``: what it would have removed)."""

    layer: str
    table: str
    files: int
    compacted: int
    written: int
    retention: Retention
    removed: int
    removed_bytes: int | None
    dry_run: bool

    def line(self) -> str:
        """One line for the log, e.g. ``maintain bronze.cdc_raw: compacted 12 files into 2;
        vacuum (retain 168 h: the table's deleted-file retention) removed 12 files (40.1 KB)``.
        """
        size = "" if self.removed_bytes is None else f" ({_size(self.removed_bytes)})"
        retention = self.retention
        raised = (
            f", {'would raise' if self.dry_run else 'raised'} from {retention.configured:g} h"
            if retention.raised
            else ""
        )
        vacuum = f"vacuum (retain {retention.hours} h{raised}: {retention.reason})"
        if self.dry_run:
            # Counted with the retention the table has now: a raise would keep more.
            bound = "at most " if retention.raised else ""
            return (
                f"maintain {self.table} (dry run): {self.files} files, not compacted; "
                f"{vacuum} would remove {bound}{self.removed} files{size}"
            )
        compaction = (
            f"compacted {self.compacted} files into {self.written}"
            if self.compacted
            else f"nothing to compact ({self.files} files)"
        )
        return f"maintain {self.table}: {compaction}; {vacuum} removed {self.removed} files{size}"


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TB"  # pragma: no cover - unreachable


def interval_hours(text: str) -> float:
    """Hours of a Delta interval property such as ``delta.deletedFileRetentionDuration``.

    >>> interval_hours("interval 1 week"), interval_hours("interval 36 hours")
    (168.0, 36.0)
    >>> interval_hours("interval 2 days 30 minutes")
    48.5

    Raises ``ValueError`` for text that is not an interval of the units Delta accepts.
    """
    body = text.strip().lower().removeprefix("interval").strip()
    parts = _INTERVAL_PART.findall(body)
    if not parts or _INTERVAL_PART.sub("", body).strip():
        raise ValueError(f"not an interval: {text!r}")
    hours = 0.0
    for amount, unit in parts:
        if unit not in _UNIT_HOURS:
            raise ValueError(f"unknown interval unit {unit!r} in {text!r}")
        hours += float(amount) * _UNIT_HOURS[unit]
    return hours


def retention_for(configured_hours: float, needed_age_hours: float | None) -> int:
    """Whole hours of deleted-file retention: the configured retention, unless a reader
    still needs versions as old as ``needed_age_hours`` (None: no such reader) and that
    age plus a margin exceeds it; then that age plus the configured retention again (at
    least the margin), so the reader keeps the slack it normally has.

    >>> retention_for(168.0, None), retention_for(168.0, 2.5), retention_for(168.0, 200.2)
    (168, 168, 369)
    >>> retention_for(0.0, 0.01)
    2
    """
    hours = math.ceil(configured_hours)
    if needed_age_hours is not None and math.ceil(needed_age_hours) + MARGIN_HOURS > hours:
        hours = math.ceil(needed_age_hours) + max(hours, MARGIN_HOURS)
    return hours


def layer_tables(spark: SparkSession, layer: str) -> list[str]:
    """The Delta tables of a layer: every table of its schema (views left out) and the
    pipeline state tables it writes, those that exist, in name order."""
    if layer not in LAYERS:
        raise ValueError(f"unknown layer {layer!r} (one of {', '.join(LAYERS)})")
    names: list[str] = []
    if spark.catalog.databaseExists(layer):
        names += [
            f"{layer}.{t.name}"
            for t in spark.catalog.listTables(layer)
            if t.tableType in ("MANAGED", "EXTERNAL") and not t.isTemporary
        ]
    names += [t for t in STATE_TABLES[layer] if table_exists(spark, t)]
    return sorted(names)


def _quoted(table: str) -> str:
    # Names come from the catalog and from constants, never from messages.
    return ".".join(f"`{part}`" for part in table.split("."))


def _detail(spark: SparkSession, table: str) -> Row:
    row = spark.sql(f"describe detail {_quoted(table)}").first()
    assert row is not None
    return row


def _configured_hours(properties: dict[str, str] | None) -> float:
    text = (properties or {}).get(RETENTION_PROPERTY)
    return DEFAULT_RETENTION_HOURS if text is None else interval_hours(text)


def _version_age_hours(spark: SparkSession, table: str, version: int) -> float | None:
    """Hours since ``version`` of ``table`` was committed. When the history no longer has
    it, the oldest version it has counts (everything that one still reads is kept)."""
    history = spark.sql(f"describe history {_quoted(table)}").select(
        "version",
        ((F.unix_micros(F.current_timestamp()) - F.unix_micros("timestamp")) / 3.6e9).alias(
            "hours"
        ),
    )
    row = (
        history.where(F.col("version") <= version).orderBy(F.col("version").desc()).first()
        or history.orderBy("version").first()
    )
    return None if row is None else float(row["hours"])


def change_log_needs(spark: SparkSession, config: LakehouseConfig) -> int | None:
    """The oldest change-log version gold still reads: the least advanced declared gold
    table's applied version (its change feed starts right after it). None when no declared
    table has applied anything yet (a table's first run reads the change log's current
    snapshot, not its history)."""
    from pyspark_jobs.gold.change_feed import applied_progress

    if not table_exists(spark, PROGRESS_TABLE):
        return None
    declared = {entity.table for _, entity in config.tables()}
    applied = [
        p.version for t, p in applied_progress(spark).items() if t in declared and p.version >= 0
    ]
    return min(applied, default=None)


def table_retention(
    spark: SparkSession,
    table: str,
    properties: dict[str, str] | None,
    gold_version: int | None,
    rebuilds: Mapping[str, int] | None = None,
) -> Retention:
    """The deleted-file retention ``table`` needs (see the module's docstring);
    ``gold_version``: the oldest change-log version gold still reads (``change_log_needs``);
    ``rebuilds``: gold table -> the version an unfinished rebuild reads
    (``gold.rebuild.unfinished_rebuilds``, by qualified name).
    """
    configured = _configured_hours(properties)
    floor = Retention(
        retention_for(configured, None), "the table's deleted-file retention", configured
    )
    if table == CHANGE_LOG_TABLE and gold_version is not None:
        version = gold_version
        reads, raised_because = (
            f"gold reads from version {version} on",
            f"gold reads the change feed from version {version} on",
        )
    elif rebuilds and table in rebuilds:
        version = rebuilds[table]
        reads = raised_because = f"an unfinished rebuild reads version {version}"
    else:
        return floor
    age = _version_age_hours(spark, table, version)
    hours = retention_for(configured, age)
    if hours == floor.hours:
        return Retention(hours, f"the table's deleted-file retention; {reads}", configured)
    return Retention(hours, f"{raised_because}, {age:.1f} h old", configured)


def _raise_retention(spark: SparkSession, table: str, hours: int) -> None:
    spark.sql(
        f"alter table {_quoted(table)} set tblproperties "
        f"('{RETENTION_PROPERTY}' = 'interval {int(hours)} hours')"
    )


def optimize_table(spark: SparkSession, table: str) -> tuple[int, int]:
    """OPTIMIZE ``table``: (files removed, files written)."""
    row = spark.sql(f"optimize {_quoted(table)}").first()
    if row is None or row["metrics"] is None:
        return 0, 0
    metrics = row["metrics"]
    return int(metrics["numFilesRemoved"] or 0), int(metrics["numFilesAdded"] or 0)


def _vacuum(spark: SparkSession, table: str, dry_run: bool) -> tuple[int, int | None]:
    """VACUUM with the table's own retention (or its dry run): (files removed, bytes
    removed or None when unknown)."""
    statement = f"vacuum {_quoted(table)}"
    if dry_run:
        return spark.sql(f"{statement} dry run").count(), None
    spark.sql(statement).collect()
    # VACUUM records its own metrics in the history (VACUUM START: what it found to
    # delete; VACUUM END: what it deleted).
    latest = (
        spark.sql(f"describe history {_quoted(table)} limit 2")
        .select("operation", "operationMetrics")
        .collect()
    )
    metrics = {r["operation"]: r["operationMetrics"] or {} for r in latest}
    removed = int(metrics.get("VACUUM END", {}).get("numDeletedFiles", 0))
    size = metrics.get("VACUUM START", {}).get("sizeOfDataToDelete")
    return removed, None if size is None else int(size)


def maintain_table(
    spark: SparkSession,
    layer: str,
    table: str,
    dry_run: bool = False,
    gold_version: int | None = None,
    rebuilds: Mapping[str, int] | None = None,
) -> TableMaintenance | None:
    """OPTIMIZE, raise the deleted-file retention where a reader needs it, VACUUM
    (``dry_run``: none of these; count what VACUUM would remove). None for a table that is
    not a Delta table. ``gold_version``, ``rebuilds``: see ``table_retention``."""
    detail = _detail(spark, table)
    if detail["format"] != "delta":
        return None
    files = int(detail["numFiles"] or 0)
    compacted, written = (0, 0) if dry_run else optimize_table(spark, table)
    retention = table_retention(spark, table, detail["properties"], gold_version, rebuilds)
    if retention.raised and not dry_run:
        _raise_retention(spark, table, retention.hours)
    removed, removed_bytes = _vacuum(spark, table, dry_run)
    return TableMaintenance(
        layer, table, files, compacted, written, retention, removed, removed_bytes, dry_run
    )


def maintain(
    spark: SparkSession,
    config: LakehouseConfig,
    layers: Sequence[str] = LAYERS,
    dry_run: bool = False,
    log: Callable[[str], None] = print,
) -> list[TableMaintenance]:
    """Compact and clean every Delta table of ``layers``, one log line per table, in
    layer and name order.

    Tables are maintained ``THREADS`` at a time: each command is a few small Spark jobs
    and Delta log work, mostly waiting on the driver, and commands on different tables
    never conflict. The caller holds the pipeline's locks (``cli.cmd_maintain``): a
    compaction racing a gold MERGE on the same table would make one of them fail.
    """
    # VACUUM writes its metrics into the table history only when this is on.
    spark.conf.set("spark.databricks.delta.vacuum.logging.enabled", "true")
    with _listing_parallelism(spark):
        return _maintain(spark, config, layers, dry_run, log)


@contextmanager
def _listing_parallelism(spark: SparkSession) -> Iterator[None]:
    """VACUUM lists a table's folders in as many tasks as
    ``spark.sql.sources.parallelPartitionDiscovery.parallelism`` says, 10000 by default:
    minutes of task overhead for a small table (105 s against 5 s for a two-partition
    table on two cores). The cluster's parallelism is enough; the setting is put back
    after."""
    key = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
    with temporary_conf(spark, {key: str(max(1, spark.sparkContext.defaultParallelism))}):
        yield


def _maintain(
    spark: SparkSession,
    config: LakehouseConfig,
    layers: Sequence[str],
    dry_run: bool,
    log: Callable[[str], None],
) -> list[TableMaintenance]:
    chosen: list[tuple[str, str]] = []
    for layer in layers:
        tables = layer_tables(spark, layer)
        if not tables:
            log(f"maintain {layer}: no tables yet")
        chosen += [(layer, table) for table in tables]
    # Read before any table is touched: the progress table is maintained too.
    gold_version = (
        change_log_needs(spark, config) if any(t == CHANGE_LOG_TABLE for _, t in chosen) else None
    )
    rebuilds = {f"gold.{t}": v for t, v in unfinished_rebuilds(spark).items()}
    done = []
    with ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="maintain") as pool:
        results = pool.map(
            lambda lt: maintain_table(spark, lt[0], lt[1], dry_run, gold_version, rebuilds),
            chosen,
        )
        for result in results:
            if result is not None:
                log(result.line())
                done.append(result)
    return done


def lake_files(spark: SparkSession) -> dict[str, int]:
    """Every Delta table of the lake (each layer's and the pipeline's state tables) ->
    its data files, from its Delta log (no Spark job); a table whose log has no checksum
    is left out."""
    files = {}
    for layer in LAYERS:
        for table in layer_tables(spark, layer):
            count = data_files(spark, table)
            if count is not None:
                files[table] = count
    return files


def compact_grown_tables(
    spark: SparkSession, growth: FileGrowth, log: Callable[[str], None] = print
) -> dict[str, tuple[int, int]]:
    """OPTIMIZE the tables ``growth`` finds due (``file_growth``), ``THREADS`` at a time;
    one log line each. Returns table -> (files removed, files written).

    Only OPTIMIZE: its commit changes no data, so silver's watermark on bronze and gold's
    change feed skip it as they skip ``maintain``'s; the files it replaces stay on disk
    until a VACUUM. The caller holds the pipeline's locks, as for ``maintain``.
    """
    files = lake_files(spark)
    due = growth.due(files)
    if not due:
        return {}
    with ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="compact") as pool:
        results = dict(zip(due, pool.map(lambda t: optimize_table(spark, t), due), strict=True))
    for table, (removed, written) in results.items():
        growth.compacted(table, files[table] - removed + written)
        log(
            f"compacted {table}: {removed} files into {written} ({files[table]} before)"
            if removed
            else f"compaction of {table}: nothing to compact ({files[table]} files)"
        )
    return results
