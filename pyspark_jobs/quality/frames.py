"""The summary frames the gates validate: one small row per source (bronze, silver) or per
gold table, holding every count a layer's checks need.

Each layer's gate reads the tables it guards once, in one Spark query, and reduces them to
these few rows; GX then checks the numbers (the gold gate reads its small tables first, on
a pool, a query each: ``snapshots.read_tables``). Reconciliations span tables, so GX could
not express them as expectations anyway, and a check on whole tables costs GX several Spark
jobs per expectation, while counting everything in one query costs one pass.

Every count is over whole tables, never "this run's rows": a gate that failed and was
re-run without new data would otherwise validate nothing and let the bad data through.
Counts are never null (a null passes GX's range checks, which skip nulls).

The transforms take DataFrames and plain values and return DataFrames; only
``build_frame`` reads tables.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from pyspark_jobs.bronze.tables import QUARANTINE_TABLE, RAW_TABLE
from pyspark_jobs.catalog import table_exists
from pyspark_jobs.config import Entity, LakehouseConfig, Source
from pyspark_jobs.delta_log import holds_files
from pyspark_jobs.empty_frames import empty_frame
from pyspark_jobs.gold.staging import PENDING_TABLE, STATE
from pyspark_jobs.gold.tables import (
    GOLD_SCHEMA,
    REJECTS_TABLE,
    SEQ_TYPE,
    TOMBSTONES_TABLE,
    gold_columns,
    gold_table_name,
)
from pyspark_jobs.job_names import named_jobs
from pyspark_jobs.quality.definitions import CheckpointSpec
from pyspark_jobs.snapshots import load_snapshots, read_tables

CHANGE_LOG = "silver.change_log"
REJECTS = "silver.change_log_rejects"
POSITION = ("source", "topic", "partition", "offset")
# A bronze record's coordinates: none of them may be null.
COORDINATES = ("source", "format", "topic", "partition", "offset")
# How many offending values a summary row keeps to name in a failure (they are examples:
# the count is the check).
EXAMPLES = 3


def _rate(part: Column, whole: Column) -> Column:
    return F.when(whole > 0, part / whole).otherwise(F.lit(0.0))


def _any(conditions: list[Column]) -> Column:
    return functools.reduce(lambda a, b: a | b, conditions)


def _examples(values: Column) -> Column:
    """At most ``EXAMPLES`` distinct values of an aggregate's rows, sorted (stable output)."""
    return F.slice(F.array_sort(F.collect_set(values)), 1, EXAMPLES)


def _merged_examples(arrays: Column) -> Column:
    """The examples of several partial aggregates, merged and cut again."""
    return F.slice(F.array_sort(F.array_distinct(F.flatten(F.collect_list(arrays)))), 1, EXAMPLES)


def _per_source(
    sources: DataFrame, parts: list[DataFrame], counts: list[str], examples: list[str]
) -> DataFrame:
    """One row per source from partial per-source aggregates: every configured source gets
    its row (a source with no data counts 0), and a source the data names but config does
    not gets one too. Unions and a group-by rather than joins, so a null source is one row
    like any other."""
    zeros = sources.select(
        "source",
        *(F.lit(0).cast("bigint").alias(c) for c in counts),
        *(F.array().cast("array<string>").alias(e) for e in examples),
    )
    stacked = functools.reduce(
        lambda a, b: a.unionByName(b, allowMissingColumns=True), [zeros, *parts]
    )
    return stacked.groupBy("source").agg(
        *(F.coalesce(F.sum(c), F.lit(0)).cast("bigint").alias(c) for c in counts),
        *(_merged_examples(F.coalesce(F.col(e), F.array())).alias(e) for e in examples),
    )


def bronze_reconciliation(sources: DataFrame, raw: DataFrame, quarantine: DataFrame) -> DataFrame:
    """Per source: records ``read`` (landed + quarantined), ``quarantined``, the
    ``quarantine_rate``, records with a ``null_coordinates`` (source, format, topic,
    partition or offset), and ``duplicate_positions``: Kafka positions (source, topic,
    partition, offset) landed more than once, with a few as ``duplicate_position_examples``.

    Uniqueness is per source: a deliberate re-ingest of a topic under another source name
    (after resetting a checkpoint), or two sources reading one topic, lands each record
    once per source, which is not a duplicate.
    """
    null_coordinate = _any([F.col(c).isNull() for c in COORDINATES])
    positions = raw.groupBy(*POSITION).agg(
        F.count(F.lit(1)).alias("copies"),
        F.count_if(null_coordinate).alias("null_coordinates"),
    )
    duplicate = (F.col("copies") > 1) & ~_any([F.col(c).isNull() for c in POSITION])
    landed = positions.groupBy("source").agg(
        F.sum("copies").alias("landed"),
        F.sum("null_coordinates").alias("null_coordinates"),
        F.count_if(duplicate).alias("duplicate_positions"),
        _examples(F.when(duplicate, F.concat_ws("/", "topic", "partition", "offset"))).alias(
            "duplicate_position_examples"
        ),
    )
    quarantined = quarantine.groupBy("source").agg(F.count(F.lit(1)).alias("quarantined"))
    counts = ["landed", "quarantined", "null_coordinates", "duplicate_positions"]
    per_source = _per_source(
        sources, [landed, quarantined], counts, ["duplicate_position_examples"]
    )
    read = F.col("landed") + F.col("quarantined")
    return per_source.select(
        "source",
        read.alias("read"),
        "quarantined",
        _rate(F.col("quarantined"), read).alias("quarantine_rate"),
        "null_coordinates",
        "duplicate_positions",
        "duplicate_position_examples",
    )


RECONCILIATION = ("changes", "redelivered", "rejected", "noops", "skipped", "unaccounted")


def message_fingerprint(key: str, value: str) -> Column:
    """A 96-bit fingerprint of a record's key and value (xxhash64 and murmur3, each over
    the two columns in turn, so a null key, an empty one and a key running into the value
    all differ): what the silver gate compares to find a redelivery, instead of the texts.
    Two different messages of one source share one with odds of about n * m / 2^96 (n
    unplaced records, m logged ones): never, at any lake's size."""
    return F.struct(F.xxhash64(key, value).alias("xxhash64"), F.hash(key, value).alias("murmur3"))


def silver_reconciliation(
    sources: DataFrame, raw: DataFrame, log: DataFrame, rejects: DataFrame
) -> DataFrame:
    """Per source: where each bronze record went.

    Rule (by lineage): a bronze record (source, topic, partition, offset) is accounted for
    when a change in the log carries its position (``changes``; one record may yield
    several changes), a reject carries it (``rejected``), its value is null (``noops``:
    the Kafka tombstone after a delete; formats that reject a null value count under
    ``rejected`` first), it is a message its format defines as no change (``skipped``: a
    Debezium message event, ``op`` m, which silver neither logs nor rejects), or its key
    and value are those of a record that is in the log (``redelivered``: the same message
    under another offset, kept once; compared by ``message_fingerprint``). Anything else
    is ``unaccounted``.
    ``reject_rate`` = rejected / bronze records.

    The change log's own row constraints (change_id not null and unique, op in the
    vocabulary, ...) are Delta constraints and a dbt data test (models/silver/_silver.yml),
    not counted here.

    ``raw`` needs source, format, topic, partition, offset, key and value; ``log`` source
    and lineage; ``rejects`` source and lineage.
    """
    in_log = (
        log.select("source", *(F.col(f"lineage.{c}").alias(c) for c in POSITION[1:]))
        .distinct()
        .withColumn("in_log", F.lit(True))
    )
    in_rejects = (
        rejects.select("source", *(F.col(f"lineage.{c}").alias(c) for c in POSITION[1:]))
        .distinct()
        .withColumn("in_rejects", F.lit(True))
    )

    # The one field the gate reads in a value: the Debezium op, inside the JSON
    # converter's {"schema", "payload"} envelope when there is one (as stg_cdc__debezium).
    debezium_op = F.when(
        F.get_json_object("value", "$.schema").isNotNull(),
        F.get_json_object("value", "$.payload.op"),
    ).otherwise(F.get_json_object("value", "$.op"))
    # The op can be m only where the text holds an m as a JSON string: quoted (Spark's
    # JSON reader takes single quotes too) or escaped. Looking for that first leaves
    # almost every value unparsed (1,000,000 records: 2.6 -> 1.05 s).
    may_be_m = (
        F.col("value").contains('"m"')
        | F.col("value").contains("'m'")
        | F.col("value").contains("\\u006")
    )
    message_event = (
        (F.col("format") == "debezium") & may_be_m & F.coalesce(debezium_op == "m", F.lit(False))
    )
    # What the rules need of a record's key and value is taken before any shuffle, so the
    # texts never travel through the joins (docs/performance.md).
    message = F.when(F.col("value").isNotNull(), message_fingerprint("key", "value"))
    located = (
        raw.select(
            *POSITION,
            F.col("value").isNull().alias("null_value"),
            message_event.alias("message_event"),
            message.alias("message"),
        )
        .join(in_log, list(POSITION), "left")
        .join(in_rejects, list(POSITION), "left")
    )
    # A redelivery: another record of the source with the same message is in the log. A
    # window over (source, message), not a join of the records with the logged ones, so
    # bronze is read once (a join read it twice). ``in_log`` is true or null, so is the
    # max. A null message (a null value) groups with other null ones, but those records
    # are counted as noops before this applies.
    same_as_logged = F.max("in_log").over(Window.partitionBy("source", "message"))
    classified = located.select(
        "source",
        F.when(F.col("in_log"), "changes")
        .when(F.col("in_rejects"), "rejected")
        .when(F.col("null_value"), "noops")
        .when(F.col("message_event"), "skipped")
        .when(same_as_logged, "redelivered")
        .otherwise("unaccounted")
        .alias("status"),
    )
    accounted = classified.groupBy("source").agg(
        F.count(F.lit(1)).alias("bronze_records"),
        *(F.count_if(F.col("status") == s).alias(s) for s in RECONCILIATION),
    )
    per_source = _per_source(sources, [accounted], ["bronze_records", *RECONCILIATION], [])
    return per_source.select(
        "source",
        "bronze_records",
        *RECONCILIATION,
        _rate(F.col("rejected"), F.col("bronze_records")).alias("reject_rate"),
    )


# What ``gold_rows`` gives, for a gate over no gold row at all.
GOLD_ROWS_SCHEMA = (
    "table string, record_key string, key_values string, null_keys array<string>, "
    f"live boolean, seq {SEQ_TYPE}, change_id string"
)


def gold_rows(
    table: DataFrame, table_name: str, key: tuple[str, ...], soft_delete: bool
) -> DataFrame:
    """A gold table's rows reduced to what the gold checks need, in a shape every table
    shares: ``table``, ``record_key``, ``key_values`` (the typed key as JSON, so
    uniqueness is also checked on the declared types, not only on the canonical
    ``_record_key`` text), ``null_keys`` (the key columns the row leaves empty), ``live``
    (not soft-deleted), ``seq`` and ``change_id``."""
    live = ~F.coalesce(F.col("_deleted"), F.lit(False)) if soft_delete else F.lit(True)
    nulls = [F.when(F.col(k).isNull(), F.lit(k)) for k in key]
    return table.select(
        F.lit(table_name).alias("table"),
        F.col("_record_key").alias("record_key"),
        F.to_json(F.struct(*key)).alias("key_values"),
        F.filter(F.array(*nulls), lambda k: k.isNotNull()).alias("null_keys"),
        live.alias("live"),
        F.col("_seq").alias("seq"),
        F.col("_change_id").alias("change_id"),
    )


def schema_differences(table: DataFrame, declared: list[tuple[str, str]]) -> str | None:
    """``COL: declared T, table has U; ...`` for columns whose type is not as config says."""
    actual = {f.name: f.dataType.simpleString() for f in table.schema.fields}
    differences = [
        f"{name}: declared {typ}, table has {actual.get(name, 'no such column')}"
        for name, typ in declared
        if actual.get(name, "").replace(" ", "") != typ.replace(" ", "")
    ]
    return "; ".join(differences) or None


GOLD_COUNTS = (
    "rows",
    "live_rows",
    "null_record_keys",
    "null_key_columns",
    "duplicate_record_keys",
    "duplicate_keys",
    "deleted_keys_live",
    "states_not_applied",
    "rejected_states",
)


def gold_reconciliation(
    tables: DataFrame, rows: DataFrame, tombstones: DataFrame, staged: DataFrame
) -> DataFrame:
    """One row per gold table: its keys, and its rows against what its own fold decided.

    ``tables``: (table, table_name, entity_kind, schema_differences) per gold table of
    config; ``rows``: ``gold_rows`` of every table; ``tombstones``:
    ``lakehouse.gold_tombstones``; ``staged``: the net states of the last gold run
    (``lakehouse.gold_pending`` rows of kind ``state``).

    Key checks (all rows, soft-deleted ones too): ``null_record_keys``,
    ``null_key_columns`` (rows with an empty key column, named in
    ``null_key_column_names``), ``duplicate_record_keys`` and ``duplicate_keys`` (rows
    whose ``_record_key``, or typed key, another row of the table also has).

    The reconciliation asks nothing the fold did not decide, so it holds for every family
    (implicit vertices, ``insert-only``, cascades, Cassandra cell liveness):

    - ``deleted_keys_live``: live rows older than their key's tombstone (or the table's
      truncate): the fold deleted the key and nothing newer brought it back;
    - ``states_not_applied``: states of the last run that gold does not reflect (a live
      state without its row and change, a deleted state still live); states the run
      rejected (``rejected_states``, in ``lakehouse.gold_rejects``) are not expected.
    """
    named = F.broadcast(tables.select("table", "table_name"))
    tombs = tombstones.join(named, "table_name")
    # One tombstone per key (MERGE-keyed); max() keeps the join one-to-one regardless.
    keyed = (
        tombs.where(F.col("record_key") != "{}")
        .groupBy("table", "record_key")
        .agg(F.max("seq").alias("tomb_seq"))
    )
    table_wide = (
        tombs.where(F.col("record_key") == "{}")
        .groupBy("table")
        .agg(F.max("seq").alias("table_tomb_seq"))
    )
    states = staged.join(named, "table_name").select(
        "table",
        F.col("_record_key").alias("record_key"),
        F.lit(True).alias("staged"),
        F.col("_live").alias("state_live"),
        F.col("_seq").alias("state_seq"),
        F.col("_change_id").alias("state_change_id"),
        F.col("_reject_reason").isNotNull().alias("rejected"),
    )
    # Both windows and the joins read the gold rows once; the last window leaves them
    # partitioned by (table, record_key), as the joins need.
    windowed = (
        rows.withColumn("present", F.lit(True))
        .withColumn("key_copies", F.count(F.lit(1)).over(Window.partitionBy("table", "key_values")))
        .withColumn(
            "record_key_copies",
            F.count(F.lit(1)).over(Window.partitionBy("table", "record_key")),
        )
    )
    joined = (
        windowed.join(states, ["table", "record_key"], "full_outer")
        .join(keyed, ["table", "record_key"], "left")
        .join(F.broadcast(table_wide), "table", "left")
    )
    present = F.coalesce(F.col("present"), F.lit(False))
    live = present & F.col("live")
    staged_state = F.coalesce(F.col("staged"), F.lit(False))
    reflected = F.when(
        F.col("state_live"),
        live
        & (F.col("seq") == F.col("state_seq"))
        & (F.col("change_id") == F.col("state_change_id")),
    ).otherwise(~live)
    deleted_live = live & (
        (F.coalesce(F.col("tomb_seq") > F.col("seq"), F.lit(False)))
        | (F.coalesce(F.col("table_tomb_seq") > F.col("seq"), F.lit(False)))
    )
    counts = joined.groupBy("table").agg(
        F.count_if(present).alias("rows"),
        F.count_if(live).alias("live_rows"),
        F.count_if(present & F.col("record_key").isNull()).alias("null_record_keys"),
        F.count_if(present & (F.size("null_keys") > 0)).alias("null_key_columns"),
        F.concat_ws(
            ", ", F.array_sort(F.array_distinct(F.flatten(F.collect_list("null_keys"))))
        ).alias("null_key_column_names"),
        F.count_if(
            present & F.col("record_key").isNotNull() & (F.col("record_key_copies") > 1)
        ).alias("duplicate_record_keys"),
        F.count_if(present & (F.col("key_copies") > 1)).alias("duplicate_keys"),
        F.count_if(deleted_live).alias("deleted_keys_live"),
        F.count_if(staged_state & ~F.col("rejected") & ~reflected).alias("states_not_applied"),
        F.count_if(staged_state & F.col("rejected")).alias("rejected_states"),
    )
    return (
        tables.select("table", "entity_kind", "schema_differences")
        .join(counts, "table", "left")
        .na.fill(0, list(GOLD_COUNTS))
        .withColumn(
            "null_key_column_names",
            F.when(F.col("null_key_column_names") != "", F.col("null_key_column_names")),
        )
        .select("table", "entity_kind", "schema_differences", *GOLD_COUNTS, "null_key_column_names")
    )


def _union(frames: list[DataFrame]) -> DataFrame:
    return functools.reduce(DataFrame.unionByName, frames)


def build_frame(spark: SparkSession, config: LakehouseConfig, spec: CheckpointSpec) -> DataFrame:
    """Read the tables a layer's gate guards and build its summary frame (lazy: the gate
    materializes it once)."""
    return _BUILDERS[spec.frame](spark, config, spec)


# The frames with one row per source that reads nothing but that source's rows of the
# layer's tables (each partitioned by source): ``source_frame`` builds their rows of a
# few sources.
SOURCE_FRAMES = ("bronze_reconciliation", "silver_reconciliation")


def source_frame(
    spark: SparkSession, config: LakehouseConfig, spec: CheckpointSpec, sources: Collection[str]
) -> DataFrame:
    """The rows of ``sources`` of a ``SOURCE_FRAMES`` summary frame, reading only those
    sources' partitions: each row is the one the whole frame has for its source."""
    if spec.frame == "bronze_reconciliation":
        return _bronze(spark, config, spec, sources)
    if spec.frame == "silver_reconciliation":
        return _silver(spark, config, spec, sources)
    raise ValueError(f"{spec.frame} has no row per source")


def frame_tables(config: LakehouseConfig, layer: str) -> tuple[str, ...]:
    """The tables a layer's summary frame reads (each builder requires exactly these)."""
    if layer == "bronze":
        return (RAW_TABLE, QUARANTINE_TABLE)
    if layer == "silver":
        return (RAW_TABLE, CHANGE_LOG, REJECTS)
    gold = tuple(gold_table_name(e) for _, e in config.tables())
    return (*gold, TOMBSTONES_TABLE, PENDING_TABLE)


def tables_read(config: LakehouseConfig, layer: str) -> tuple[str, ...]:
    """Every table a layer's gate reads: its summary frame's, and the table its report
    samples come from (``problem_samples``). Equal versions of these, equal data read
    (``gate_reuse``)."""
    return (*frame_tables(config, layer), _problem_tables()[layer][0])


def _require(spark: SparkSession, *tables: str) -> None:
    missing = [t for t in tables if not table_exists(spark, t)]
    if missing:
        raise MissingTable(f"{', '.join(missing)} does not exist yet: build the layer first")


class MissingTable(RuntimeError):
    """The gate's table is not there: the layer has not been built."""


def _sources(
    spark: SparkSession, config: LakehouseConfig, only: Collection[str] | None
) -> DataFrame:
    """Every configured source (of ``only``), so a source with no records still gets its
    row."""
    names = [s.name for s in config.sources if only is None or s.name in only]
    return spark.createDataFrame([(name,) for name in names], "source string")


def _of_sources(spark: SparkSession, table: str, only: Collection[str] | None) -> DataFrame:
    """``table``'s rows (of the sources ``only``: its partitions of them)."""
    rows = spark.table(table)
    return rows if only is None else rows.where(F.col("source").isin(*only))


def _bronze(
    spark: SparkSession,
    config: LakehouseConfig,
    spec: CheckpointSpec,
    only: Collection[str] | None = None,
) -> DataFrame:
    _require(spark, *frame_tables(config, "bronze"))
    return bronze_reconciliation(
        _sources(spark, config, only),
        _of_sources(spark, RAW_TABLE, only).select(*COORDINATES),
        _of_sources(spark, QUARANTINE_TABLE, only).select("source"),
    )


def _silver(
    spark: SparkSession,
    config: LakehouseConfig,
    spec: CheckpointSpec,
    only: Collection[str] | None = None,
) -> DataFrame:
    _require(spark, *frame_tables(config, "silver"))
    return silver_reconciliation(
        _sources(spark, config, only),
        _of_sources(spark, RAW_TABLE, only),
        _of_sources(spark, CHANGE_LOG, only),
        _of_sources(spark, REJECTS, only),
    )


def _gold_tables(spark: SparkSession, config: LakehouseConfig) -> list[tuple[Source, Entity, str]]:
    tables = [(s, e, gold_table_name(e)) for s, e in config.tables()]
    _require(spark, *(name for _, _, name in tables))
    return tables


def _read(spark: SparkSession, table: str, pins: Mapping[str, int]) -> DataFrame:
    """``table`` as of its pinned version, or as it is now."""
    if table in pins:
        return spark.sql(f"select * from {table} version as of {int(pins[table])}")
    return spark.table(table)


def _gold(spark: SparkSession, config: LakehouseConfig, spec: CheckpointSpec) -> DataFrame:
    return gold_frame(spark, config)


def gold_frame(
    spark: SparkSession,
    config: LakehouseConfig,
    only: Collection[str] | None = None,
    pins: Mapping[str, int] | None = None,
) -> DataFrame:
    """The gold summary frame: a row per gold table of config, or of those of them named
    in ``only`` (``gold.<table>``). ``pins``: versions to read the tombstone and pending
    tables at (``gate_reuse`` reads them at the versions it recorded)."""
    tables = [t for t in _gold_tables(spark, config) if only is None or t[2] in only]
    _require(spark, TOMBSTONES_TABLE, PENDING_TABLE)  # frame_tables(config, "gold"), all
    pins = pins or {}
    # A table whose log says it holds no file has no row to check: it is neither loaded
    # nor scanned (on a first run, a state reconstruction and a file listing each), and
    # its summary row is the one a scan of no rows gives.
    held = {name: e for _, e, name in tables if holds_files(spark, name)}
    # Read on a pool, each small table materialized: the summary query then plans a few
    # in-memory relations, not a Delta scan per table one after the other (a spread warm
    # cycle's gold gate over 24 tables: docs/quality.md).
    with named_jobs(spark, "gold gate: read tables"):
        load_snapshots(spark, [TOMBSTONES_TABLE, PENDING_TABLE])
        read = read_tables(
            spark,
            {
                name: functools.partial(_gold_rows_of, name=name, entity=entity)
                for name, entity in held.items()
            },
        )
    # Schemas are metadata: compared on the driver, one row per configured table.
    described = spark.createDataFrame(
        [
            (name, e.table, e.kind, schema_differences(spark.table(name), gold_columns(e)))
            for _, e, name in tables
        ],
        "table string, table_name string, entity_kind string, schema_differences string",
    )
    rows = _union(list(read.values())) if read else empty_frame(spark, GOLD_ROWS_SCHEMA)
    staged = _read(spark, PENDING_TABLE, pins).where(F.col("row_kind") == STATE)
    return gold_reconciliation(described, rows, _read(spark, TOMBSTONES_TABLE, pins), staged)


def _gold_rows_of(table: DataFrame, name: str, entity: Entity) -> DataFrame:
    return gold_rows(table, name, entity.key, entity.soft_delete)


# What of the shared tables a gold table's summary row reads (``gold_reconciliation``):
# its tombstones, and its staged states.
SLICE_COLUMNS = {
    TOMBSTONES_TABLE: ("table_name", "record_key", "seq"),
    PENDING_TABLE: ("table_name", "_record_key", "_live", "_seq", "_change_id", "_reject_reason"),
}


def gold_slices(spark: SparkSession, pins: Mapping[str, int]) -> DataFrame:
    """Per ``table_name``: a fingerprint of its rows in the tombstone table and of its
    staged states (``row_kind = state``), each read at its version in ``pins``. Equal
    fingerprints, equal rows for that table's summary (a count and two sums of row
    hashes, so the order of rows does not matter)."""
    parts = []
    for table, columns in SLICE_COLUMNS.items():
        frame = _read(spark, table, pins)
        if table == PENDING_TABLE:
            frame = frame.where(F.col("row_kind") == STATE)
        row = F.struct(*columns)
        parts.append(
            frame.groupBy("table_name").agg(
                F.concat_ws(
                    ":",
                    F.lit(table),
                    F.count(F.lit(1)),
                    # Decimal sums: a sum of 64-bit hashes overflows a bigint (an error
                    # under ANSI mode).
                    F.sum(F.xxhash64(row).cast("decimal(20,0)")),
                    F.sum(F.hash(row).cast("decimal(20,0)")),
                ).alias("part")
            )
        )
    return (
        _union(parts)
        .groupBy("table_name")
        .agg(F.concat_ws(" ", F.array_sort(F.collect_list("part"))).alias("fingerprint"))
    )


_BUILDERS: dict[str, Callable[[SparkSession, LakehouseConfig, CheckpointSpec], DataFrame]] = {
    "bronze_reconciliation": _bronze,
    "silver_reconciliation": _silver,
    "gold_reconciliation": _gold,
}


# A few rows of what a layer set aside, per source or gold table, for the report's
# drill-down: the layer's table of problems, the row key, and what to show.
SAMPLE_ROWS = 3
# The summary count that says a source or table has something to show.
PROBLEM_COUNT = {"bronze": "quarantined", "silver": "rejected", "gold": "rejected_states"}
RAW_SHOWN = 300  # characters of a quarantined line: enough to recognise it


def _problem_tables() -> dict[str, tuple[str, str, str, list[Column]]]:
    """layer -> (table, column naming the source/table, newest-first column, columns)."""
    return {
        "bronze": (
            QUARANTINE_TABLE,
            "source",
            "ingested_at",
            [
                F.col("reason"),
                F.substring("raw", 1, RAW_SHOWN).alias("raw"),
                F.concat_ws("/", "topic", "partition", "offset").alias("position"),
                F.col("landing_file"),
            ],
        ),
        "silver": (
            REJECTS,
            "source",
            "lineage.ingested_at",
            [
                F.col("reject_reason").alias("reason"),
                F.col("entity"),
                F.concat_ws("/", "lineage.topic", "lineage.partition", "lineage.offset").alias(
                    "position"
                ),
            ],
        ),
        "gold": (
            REJECTS_TABLE,
            "table_name",
            "recorded_at",
            [F.col("reason"), F.col("record_key"), F.col("change_id"), F.col("source")],
        ),
    }


def problem_samples(
    spark: SparkSession, layer: str, names: Collection[str]
) -> dict[str, list[dict[str, object]]]:
    """Up to ``SAMPLE_ROWS`` newest quarantined lines (bronze), silver rejects or gold
    rejects/cast failures per source or table of ``names`` (gold: ``gold.<table>``), with
    their reasons; one small query, run only when the summary counted some."""
    if not names:
        return {}
    table, by, newest, columns = _problem_tables()[layer]
    if not table_exists(spark, table):
        return {}
    frame = spark.table(table)
    wanted = [n.removeprefix(f"{GOLD_SCHEMA}.") for n in names] if layer == "gold" else names
    ranked = (
        frame.where(F.col(by).isin(list(wanted)))
        .withColumn("n", F.row_number().over(Window.partitionBy(by).orderBy(F.col(newest).desc())))
        .where(F.col("n") <= SAMPLE_ROWS)
        .select(F.col(by).alias("name"), *columns)
    )
    samples: dict[str, list[dict[str, object]]] = {}
    for row in ranked.collect():  # at most SAMPLE_ROWS per name: small by construction
        record = row.asDict()
        name = str(record.pop("name"))
        key = f"{GOLD_SCHEMA}.{name}" if layer == "gold" else name
        samples.setdefault(key, []).append({k: _show_value(v) for k, v in record.items()})
    return samples


def _show_value(value: object) -> object:
    return value if value is None or isinstance(value, (int, float, str, bool)) else str(value)
