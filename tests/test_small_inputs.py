"""A step over small tables runs without generated code, and leaves the session's code
generation settings as it found them; a large table, a table of unknown size or a
threshold of 0 keeps code generation on."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from pyspark_jobs.delta_log import table_bytes
from pyspark_jobs.small_inputs import THRESHOLD_KEY, interpreted_when_small
from tests.test_delta_log import forget_checksums

WHOLE_STAGE = "spark.sql.codegen.wholeStage"
FACTORY = "spark.sql.codegen.factoryMode"


@pytest.fixture
def small_table(spark: SparkSession, empty_lake) -> str:
    spark.sql("create database if not exists scratch")
    spark.sql("drop table if exists scratch.small")
    spark.sql("create table scratch.small (id bigint) using delta")
    spark.sql("insert into scratch.small values (1), (2)")
    return "scratch.small"


def codegen(spark: SparkSession) -> tuple[str | None, str | None]:
    return spark.conf.get(WHOLE_STAGE, None), spark.conf.get(FACTORY, None)


def test_small_tables_run_interpreted_and_the_settings_come_back(
    spark: SparkSession, small_table: str
):
    spark.conf.set(WHOLE_STAGE, "true")
    spark.conf.unset(FACTORY)
    lines: list[str] = []
    # A table a first run has not created yet reads as nothing.
    with interpreted_when_small(spark, "gold", [small_table, "scratch.absent"], lines.append) as on:
        assert on
        assert codegen(spark) == ("false", "NO_CODEGEN")
        # The interpreted plan answers as the compiled one.
        assert spark.table(small_table).groupBy().sum("id").first()[0] == 3
    assert lines == ["gold: small tables, planned without code generation"]
    assert codegen(spark) == ("true", None)


def test_settings_come_back_when_the_step_fails(spark: SparkSession, small_table: str):
    before = codegen(spark)
    with (
        pytest.raises(RuntimeError, match="step failed"),
        interpreted_when_small(spark, "silver", [small_table], lambda _: None),
    ):
        raise RuntimeError("step failed")
    assert codegen(spark) == before


@pytest.mark.parametrize("threshold", ["0", "below the table's size"])
def test_a_table_above_the_threshold_or_a_threshold_of_0_keeps_code_generation(
    spark: SparkSession, small_table: str, threshold: str
):
    size = table_bytes(spark, small_table)
    assert size is not None
    spark.conf.set(THRESHOLD_KEY, "0" if threshold == "0" else str(size - 1))
    try:
        before = codegen(spark)
        with interpreted_when_small(spark, "gold", [small_table], lambda _: None) as on:
            assert not on
            assert codegen(spark) == before
    finally:
        spark.conf.unset(THRESHOLD_KEY)
    with interpreted_when_small(spark, "gold", [small_table], lambda _: None) as on:
        assert on  # the same table under the default threshold


def test_a_table_of_unknown_size_keeps_code_generation(spark: SparkSession, small_table: str):
    forget_checksums(spark, spark.sql(f"describe detail {small_table}").first()["location"])
    assert table_bytes(spark, small_table) is None
    with interpreted_when_small(spark, "gold", [small_table], lambda _: None) as on:
        assert not on
