"""Gold rows as the folds see them: one key's image (declared value column -> text)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.delta_log import holds_files
from pyspark_jobs.empty_frames import empty_frame
from pyspark_jobs.gold.folds.shared import IMAGE_TYPE
from pyspark_jobs.gold.table_specs import GoldTable
from pyspark_jobs.gold.tables import CELL_TS_TYPE, SEQ_TYPE

IMAGES_SCHEMA = (
    f"table_name string, _record_key string, _seq {SEQ_TYPE}, _image {IMAGE_TYPE}, "
    f"_cell_ts {CELL_TS_TYPE}, _change_id string, _source string, _event_ts timestamp"
)


def table_images(
    spark: SparkSession,
    table: GoldTable,
    version: int | None = None,
    soft_deleted: bool = False,
    extra: Sequence[str] = (),
) -> DataFrame:
    """One gold table's live rows as ``table_name``, ``_record_key``, ``_seq``, ``_image``,
    ``_cell_ts`` and the metadata of the change they reflect; as of Delta ``version`` of
    the table when given (its layout then). ``soft_deleted``: the soft-deleted rows of a
    ``soft_delete`` table instead (their values as last live); ``extra``: more of the
    table's columns, as they are."""
    entity = table.entity
    # table.name is a validated identifier (config), version an int.
    rows = (
        spark.table(table.name)
        if version is None
        else spark.sql(f"select * from {table.name} version as of {int(version)}")
    )
    present = set(rows.columns)
    if entity.soft_delete:
        deleted = F.coalesce(F.col("_deleted"), F.lit(False))
        rows = rows.where(deleted if soft_deleted else ~deleted)
    # Typed arrays, so a table without value columns still has a map<string, string>.
    image = F.map_from_arrays(
        F.array(*[F.lit(c) for c in entity.value_columns]).cast("array<string>"),
        F.array(
            *[
                # An older version may not have a column declared since.
                (F.col(c) if c in present else F.lit(None)).cast("string")
                for c in entity.value_columns
            ]
        ).cast("array<string>"),
    )
    return rows.select(
        F.lit(table.table).alias("table_name"),
        "_record_key",
        "_seq",
        image.alias("_image"),
        "_cell_ts",
        "_change_id",
        "_source",
        "_event_ts",
        *extra,
    )


def current_images(spark: SparkSession, tables: Sequence[GoldTable]) -> DataFrame:
    """The gold rows of ``tables`` as images, in one DataFrame.

    Tables without a data file are left out: on a first run every table is empty, and
    each scanned one costs a file-listing job while the fold's plan is made. With none
    left, an empty local relation, which the folds' plans over it drop without a job."""
    holding = [t for t in tables if holds_files(spark, t.name)]
    if not holding:
        return empty_frame(spark, IMAGES_SCHEMA)
    return functools.reduce(DataFrame.unionByName, [table_images(spark, t) for t in holding])
