"""The two bronze readers. Both return a streaming DataFrame with the record columns of
``pyspark_jobs.bronze.tables.RECORD_COLUMNS`` plus ``raw`` and ``problem`` (null when the
record is good), so one writer serves both."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.bronze.landing_records import one_line_base64, parse_landing_lines
from pyspark_jobs.bronze.lone_surrogates import lone_surrogate_in_key, lone_surrogate_reason
from pyspark_jobs.config import Source

# Unreachable brokers must end the run with an error, not hang it. Spark asks the brokers
# for offsets through an admin client that waits up to `kafka.default.api.timeout.ms`
# (Kafka's default: 60 s) and retries `fetchOffset.numRetries` times (Spark's default: 3),
# so a dead bootstrap server would take minutes. These bound it to about
# (numRetries + 1) x api timeout; a source's `options` override them.
KAFKA_DEFAULTS = {
    "kafka.default.api.timeout.ms": "20000",
    "kafka.request.timeout.ms": "10000",
    "fetchOffset.numRetries": "2",
    "fetchOffset.retryIntervalMs": "500",
}


# The landing files a source reads, by name, in its folder and every folder below it
# (``landing_listing`` hashes the same files).
LANDING_GLOB = "*.jsonl"


def read_landing_files(spark: SparkSession, source: Source, max_files_per_batch: int) -> DataFrame:
    """Stream the JSON-lines landing files of a source (``LANDING_GLOB`` under its folder)."""
    assert source.landing is not None
    lines = (
        spark.readStream.format("text")
        .option("pathGlobFilter", LANDING_GLOB)
        .option("recursiveFileLookup", "true")
        .option("maxFilesPerTrigger", max_files_per_batch)
        .load(str(source.landing))
        .select(F.col("value").alias("line"), F.col("_metadata.file_path").alias("landing_file"))
    )
    return parse_landing_lines(lines)


def read_kafka(spark: SparkSession, source: Source, max_offsets_per_batch: int) -> DataFrame:
    """Stream a source's Kafka topics as ``kafka_records``."""
    kafka = source.kafka
    assert kafka is not None
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("startingOffsets", kafka.starting_offsets)
        .option("maxOffsetsPerTrigger", max_offsets_per_batch)
        # Records deleted by retention before we read them are reported, not fatal.
        .option("failOnDataLoss", "false")
    )
    if kafka.topics:
        reader = reader.option("subscribe", ",".join(kafka.topics))
    else:
        reader = reader.option("subscribePattern", kafka.topic_pattern)
    for key, value in {**KAFKA_DEFAULTS, **kafka.options}.items():
        reader = reader.option(key, value)
    return kafka_records(reader.load())


def kafka_records(records: DataFrame) -> DataFrame:
    """Kafka's ``key``/``value`` bytes as the record columns, ``raw`` and ``problem``.

    Bytes that are not valid UTF-8 cannot be kept as text without changing them: such a
    record goes to quarantine with them as base64 in ``raw``; so does one whose JSON holds
    a lone surrogate escape, with that text in ``raw``.
    """
    value_text = F.expr("try_validate_utf8(value)").cast("string")
    key_text = F.expr("try_validate_utf8(key)").cast("string")
    bad_value = F.col("value").isNotNull() & value_text.isNull()
    bad_key = F.col("key").isNotNull() & key_text.isNull()
    surrogate_in_value = lone_surrogate_reason(value_text, "the value")
    surrogate_in_key = lone_surrogate_in_key(key_text)
    return records.select(
        "topic",
        "partition",
        "offset",
        F.col("timestamp").alias("kafka_timestamp"),
        key_text.alias("key"),
        value_text.alias("value"),
        F.lit(None).cast("string").alias("landing_file"),
        F.when(bad_value, one_line_base64(F.col("value")))
        .when(bad_key, one_line_base64(F.col("key")))
        .when(surrogate_in_value.isNotNull(), value_text)
        .when(surrogate_in_key.isNotNull(), key_text)
        .alias("raw"),
        F.when(bad_value, F.lit("value is not valid UTF-8"))
        .when(bad_key, F.lit("key is not valid UTF-8"))
        .otherwise(F.coalesce(surrogate_in_value, surrogate_in_key))
        .alias("problem"),
    )
