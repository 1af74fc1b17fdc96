"""``lakehouse replay-rejects``: land the silver rejects that a config fix made valid.

A bronze record is rejected when it cannot become a valid change under the config of the
time (an undeclared entity, a key column missing or of the wrong type, ...). Silver is
incremental on bronze's commit version, so once the config is fixed those records are
never read again on their own. A replay:

1. notes the positions (source, topic, partition, offset) of the rejects to replay;
2. builds silver (``build_silver``: the fixed config is published to
   ``lakehouse.entities``, new bronze records are staged as in any build) with the dbt
   var ``replay_rejects``: the change-log model also stages again the bronze records
   whose lineage is in ``silver.change_log_rejects``, and their now-valid changes land in
   ``silver.change_log`` through the model's own anti join on ``change_id``, so a change
   is logged once however often it is replayed (or redelivered);
3. settles the replayed rejects: a record that stages without a reject now leaves
   ``silver.change_log_rejects``; one still rejected stays, with its current reason.

Gold follows the change log's change data feed, so the next gold run applies the landed
changes. A replay stages the whole of bronze again to find the records (the staging
models are views), about the cost of one silver full refresh's reads, writing only what
lands. Killed half-way it is finished by running it again: what already landed is not
landed twice, and the rejects are settled from the records as they stage then.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.catalog import table_exists
from pyspark_jobs.config import LakehouseConfig
from pyspark_jobs.delta_log import latest_version
from pyspark_jobs.gold.change_feed import CHANGE_LOG_TABLE, change_log_inserts
from pyspark_jobs.settings import Settings
from pyspark_jobs.silver.build import build_silver

REJECTS_TABLE = "silver.change_log_rejects"
# The view every staged change passes through, with its reject reason (dbt model
# int_change_log__keyed, schema staging).
KEYED_VIEW = "staging.int_change_log__keyed"
POSITION = ("source", "topic", "partition", "offset")


@dataclass(frozen=True)
class ReplayReport:
    """What a replay did: the rejected records it staged again, the changes that landed in
    the change log, and how many of the records are no longer rejected."""

    replayed: int
    landed: int
    resolved: int

    @property
    def still_rejected(self) -> int:
        return self.replayed - self.resolved


def _positions(frame: DataFrame, distinct: bool = True) -> DataFrame:
    """Rows with a ``lineage`` (rejects, the change log) reduced to their bronze position."""
    positions = frame.select("source", *(F.col(f"lineage.`{c}`").alias(c) for c in POSITION[1:]))
    return positions.distinct() if distinct else positions


def current_reasons(keyed: DataFrame, replayed: DataFrame) -> DataFrame:
    """Per replayed position: the reject reason it stages with now (null: none).

    ``keyed``: staged changes with ``reject_reason`` and ``lineage`` (the model
    int_change_log__keyed); ``replayed``: positions (``POSITION`` columns). A record with
    several changes keeps the first reason in change order, as change_log_rejects keeps
    one row per record.
    """
    staged = keyed.select(
        "source",
        *(F.col(f"lineage.`{c}`").alias(c) for c in POSITION[1:]),
        "reject_reason",
        "change_id",
    )
    return (
        replayed.join(staged, list(POSITION), "left")
        .groupBy(*POSITION)
        .agg(
            F.min_by(
                "reject_reason",
                F.struct(F.col("reject_reason").isNull(), F.col("change_id")),
            ).alias("reject_reason")
        )
    )


def _landed(spark: SparkSession, after_version: int, replayed: DataFrame) -> int:
    """Changes of the ``replayed`` positions the change log gained after ``after_version``
    (read from its change data feed: the new commits only)."""
    latest = latest_version(spark, CHANGE_LOG_TABLE)
    if latest <= after_version:
        return 0
    feed = change_log_inserts(spark, after_version, latest)
    return _positions(feed, distinct=False).join(replayed, list(POSITION), "left_semi").count()


def settle_rejects(spark: SparkSession, reasons: DataFrame) -> None:
    """One MERGE into the rejects: a replayed record without a reason now leaves them, one
    with a different reason takes it. ``reasons``: ``POSITION`` and ``reject_reason``."""
    target = DeltaTable.forName(spark, REJECTS_TABLE).alias("r")
    on = " and ".join(
        ["r.source = s.source"] + [f"r.lineage.`{c}` = s.`{c}`" for c in POSITION[1:]]
    )
    (
        target.merge(reasons.alias("s"), on)
        .whenMatchedDelete(condition="s.reject_reason is null")
        .whenMatchedUpdate(
            condition="s.reject_reason <> r.reject_reason",
            set={"reject_reason": "s.reject_reason"},
        )
        .execute()
    )


def replay_rejects(
    spark: SparkSession,
    settings: Settings,
    config: LakehouseConfig,
    source_names: Sequence[str] = (),
    log: Callable[[str], None] = print,
) -> ReplayReport:
    """Land the rejects of ``source_names`` (all sources by default) that are valid under
    ``config`` now, exactly once; see the module's docstring. Raises ``DbtFailed`` when
    dbt fails (the rejects are then left as they were)."""
    for name in source_names:
        config.source(name)  # an unknown name is a ConfigError before anything runs
    if not table_exists(spark, REJECTS_TABLE):
        log(f"replay-rejects: no {REJECTS_TABLE} yet (silver was never built)")
        return ReplayReport(0, 0, 0)
    rejects = spark.table(REJECTS_TABLE)
    if source_names:
        rejects = rejects.where(F.col("source").isin(*source_names))
    # The positions replayed, fixed before anything changes (rejects are few).
    replayed = _positions(rejects).localCheckpoint()
    count = replayed.count()
    if count == 0:
        log("replay-rejects: no rejects to replay")
        return ReplayReport(0, 0, 0)
    before = latest_version(spark, CHANGE_LOG_TABLE)
    build_silver(
        spark,
        settings,
        config,
        log=log,
        dbt_vars={"replay_rejects": True, "replay_sources": list(source_names)},
    )
    landed = _landed(spark, before, replayed)
    reasons = current_reasons(spark.table(KEYED_VIEW), replayed).localCheckpoint()
    resolved = reasons.where(F.col("reject_reason").isNull()).count()
    settle_rejects(spark, reasons)
    report = ReplayReport(count, landed, resolved)
    log(
        f"replay-rejects: {count} rejected records replayed, {landed} changes landed in "
        f"{CHANGE_LOG_TABLE}, {resolved} records no longer rejected, "
        f"{report.still_rejected} still rejected (see {REJECTS_TABLE})"
    )
    return report
