"""What a gold run will write, committed once before any table is touched.

A run's writes span several Delta tables (rejects, tombstones, every gold table and its
history), and Delta commits one table at a time. So everything the folds decided is
first committed to ``lakehouse.gold_pending`` in one overwrite, as rows of four kinds:

- ``state``: a key's net state, with the reason it may not be merged (or null);
- ``version``: an SCD2 history version of a key of a ``history: true`` table;
- ``history_key``: a key whose history the run rewrites (its versions are exactly the
  ``version`` rows, possibly none);
- ``marker``: one per table the run covers.

Every later write reads these rows and is safe to repeat, so a run killed at any point is
finished by the next one from the same rows, never re-folded against half-updated tables,
and no table is skipped or applied twice. The next run replaces the pending rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.catalog import forget_table, table_exists
from pyspark_jobs.delta_log import holds_files
from pyspark_jobs.gold.folds.shared import IMAGE_TYPE
from pyspark_jobs.gold.tables import CELL_TS_TYPE, SEQ_TYPE
from pyspark_jobs.storage import clear_killed_creation
from pyspark_jobs.version_memo import memoized

PENDING_TABLE = "lakehouse.gold_pending"
STATE, VERSION, HISTORY_KEY, MARKER = "state", "version", "history_key", "marker"
# The net state's columns, why a state may not be merged, and a version's validity.
PENDING_COLUMNS: tuple[tuple[str, str], ...] = (
    ("silver_version", "bigint"),
    ("row_kind", "string"),
    ("table_name", "string"),
    ("_record_key", "string"),
    ("_live", "boolean"),
    ("_image", IMAGE_TYPE),
    ("_seq", SEQ_TYPE),
    ("_change_id", "string"),
    ("_source", "string"),
    ("_event_ts", "timestamp"),
    ("_cell_ts", CELL_TS_TYPE),
    ("_tomb_seq", SEQ_TYPE),
    ("_reject_reason", "string"),
    ("_valid_from", "timestamp"),
    ("_valid_to", "timestamp"),
    ("_is_current", "boolean"),
)


@dataclass(frozen=True)
class StagedRun:
    """A staged run: the change-log version it applies and the tables it covers.

    ``rows``: its staged rows, kept in memory by the run that staged them (the writes
    then read them there); None for a run found unfinished, read back from the table.
    """

    version: int
    tables: tuple[str, ...]
    rows: DataFrame | None = field(default=None, compare=False)


def ensure_pending_table(spark: SparkSession) -> None:
    """Create the pending table (or replace one of an older layout: it only ever holds
    the last run, which the progress table says is complete or not)."""
    if table_exists(spark, PENDING_TABLE):
        if "row_kind" in spark.table(PENDING_TABLE).columns:
            return
        spark.sql(f"drop table {PENDING_TABLE}")
        forget_table(PENDING_TABLE)
    columns = ", ".join(f"{name} {typ}" for name, typ in PENDING_COLUMNS)
    clear_killed_creation(spark, PENDING_TABLE)
    spark.sql(
        f"create table {PENDING_TABLE} ({columns}) using delta "
        "comment 'What the last gold run writes, committed before any table is written'"
    )


def _as_pending(frame: DataFrame, kind: str, version: int) -> DataFrame:
    """``frame`` in the pending layout: the columns it has, null for the others."""
    present = set(frame.columns)
    fixed = {"silver_version": F.lit(version), "row_kind": F.lit(kind)}
    return frame.select(
        *[
            fixed.get(name, F.col(name) if name in present else F.lit(None)).cast(typ).alias(name)
            for name, typ in PENDING_COLUMNS
        ]
    )


def stage(
    spark: SparkSession,
    states: DataFrame | None,
    versions: DataFrame | None,
    history_keys: DataFrame | None,
    tables: Sequence[str],
    version: int,
) -> StagedRun:
    """Commit a run's net states, history versions and rewritten history keys (None:
    there are none), with one marker per table of ``tables``, in one overwrite."""
    markers = spark.createDataFrame([(t,) for t in tables], "table_name string")
    staged = _as_pending(markers, MARKER, version)
    for frame, kind in ((states, STATE), (versions, VERSION), (history_keys, HISTORY_KEY)):
        if frame is not None:
            staged = staged.unionByName(_as_pending(frame, kind, version))
    # Computed once: written here, then read by every write of the run.
    kept = staged.localCheckpoint(eager=True)
    # An overwrite of the data, not of the table: saveAsTable would alter the metastore
    # entry every run (and the embedded Hive metastore logs an ERROR for each).
    kept.write.insertInto(PENDING_TABLE, overwrite=True)
    return StagedRun(version, tuple(tables), kept)


# The name of the staged run's markers in version_memo.
MARKERS_MEMO = "markers"


def _markers(spark: SparkSession) -> tuple[tuple[str, int], ...]:
    """(table, change-log version) of each marker row of the pending table."""
    if not holds_files(spark, PENDING_TABLE):  # a new lake's: no query for no rows
        return ()
    rows = (
        spark.table(PENDING_TABLE)
        .where(F.col("row_kind") == MARKER)
        .select("table_name", "silver_version")
        .collect()
    )
    return tuple((r["table_name"], int(r["silver_version"])) for r in rows)


def unfinished_run(spark: SparkSession, applied: dict[str, int]) -> StagedRun | None:
    """The staged run whose tables are not all marked applied, if any.

    ``applied``: table -> last change-log version applied (``lakehouse.gold_progress``).
    One marker row per table: small by construction. Kept in this process while the
    pending table has no new commit (``version_memo``): a cycle of ``run --every`` that
    staged nothing since does not query it again.
    """
    markers = memoized(spark, PENDING_TABLE, MARKERS_MEMO, lambda: _markers(spark))
    behind = [(table, version) for table, version in markers if version > applied.get(table, -1)]
    if not behind:
        return None
    return StagedRun(behind[0][1], tuple(t for t, _ in behind))


def staged_rows(spark: SparkSession, run: StagedRun, kind: str) -> DataFrame:
    """The staged rows of one kind (``STATE``, ``VERSION``, ``HISTORY_KEY``) of ``run``."""
    return run_rows(spark, run).where(F.col("row_kind") == kind)


def run_rows(spark: SparkSession, run: StagedRun) -> DataFrame:
    """Every staged row of ``run``, of all kinds."""
    if run.rows is not None:
        return run.rows
    return spark.table(PENDING_TABLE).where(F.col("silver_version") == run.version)
