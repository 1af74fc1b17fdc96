"""Empty frames Spark's optimizer knows are empty, for every step that needs one."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType


def empty_frame(spark: SparkSession, schema: StructType | str) -> DataFrame:
    """An empty frame Spark's optimizer knows is empty: an empty local relation.

    ``createDataFrame([])`` alone is an RDD that Spark must run to find it holds nothing,
    so every join with it costs shuffles and jobs; over an empty local relation the
    optimizer removes the join (or keeps the other side), without a job. ``limit(0)`` is
    what turns the RDD into that relation (the optimizer's OptimizeLimitZero)."""
    return spark.createDataFrame([], schema).limit(0)
