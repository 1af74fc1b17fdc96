"""``benchmarks.read_after_merge`` on a tiny table: its rounds merge and read for real."""

from __future__ import annotations

from pyspark.sql import SparkSession

from benchmarks.read_after_merge import TABLE, _rounds


def test_rounds_merge_read_and_count_their_jobs(spark: SparkSession):
    spark.sql("create database if not exists bench_read_after_merge")
    try:
        figures = _rounds(spark, rounds=3, rows=5, changes=2, read=True)
        # ids 0..4 at first; rounds merge ids 0-1, 2-3, 4-5: one new row in all
        rows = {(r["id"], r["v"]) for r in spark.table(TABLE).collect()}
        assert rows == {(0, "r0"), (1, "r0"), (2, "r1"), (3, "r1"), (4, "r2"), (5, "r2")}
        assert set(figures) == {"merge", "read", "read again"}
        for values in figures.values():
            assert len(values) == 3
            assert all(seconds > 0 and jobs > 0 for seconds, jobs in values)
        assert set(_rounds(spark, rounds=1, rows=5, changes=2, read=False)) == {"merge"}
    finally:
        spark.sql("drop database if exists bench_read_after_merge cascade")
