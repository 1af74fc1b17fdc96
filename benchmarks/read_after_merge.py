"""What a Delta table's first read after a commit costs, and who pays it when nobody reads.

The gold gate reads each table gold has just merged into, and that read runs Spark jobs
that rebuild the new version's state from the log (``Compute snapshot for version N``).
This measures, in one warm session with the project's Spark settings, on a small table
(``--rows`` rows, a ``--changes``-row MERGE a round): each round's MERGE, the read that
follows it, and a second read of the same version; then the same rounds without the
reads. What a MERGE saves when a read came before it is the part of the read's jobs that
is not the reader's own cost: the state rebuild the next MERGE would otherwise run. Each
kind runs twice, alternating; the first pair only warms the JVM up.

    .venv/bin/python -m benchmarks.read_after_merge [--rounds N] [--conf KEY=VALUE ...]

Prints, per kind of round, the mean seconds and Spark jobs of the last half of the
rounds (the first ones warm the JVM up).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession

from pyspark_jobs.job_names import counted_jobs
from pyspark_jobs.settings import DEFAULT_CONFIG, Settings, parse_conf_pair

TABLE = "bench_read_after_merge.t"


def _timed(spark: SparkSession, work: Callable[[], object]) -> tuple[float, int]:
    """Seconds and Spark jobs of ``work()``."""
    started = time.time()
    with counted_jobs(spark) as jobs:
        work()
        return time.time() - started, jobs()


def _rounds(
    spark: SparkSession, rounds: int, rows: int, changes: int, read: bool
) -> dict[str, list[tuple[float, int]]]:
    spark.sql(f"drop table if exists {TABLE}")
    spark.sql(f"create table {TABLE} (id bigint, v string) using delta")
    spark.range(rows).selectExpr("id", "cast(id as string) v").write.format("delta").mode(
        "append"
    ).saveAsTable(TABLE)
    figures: dict[str, list[tuple[float, int]]] = {"merge": [], "read": [], "read again": []}
    for n in range(rounds):
        source = spark.range(changes).selectExpr(f"id + {n * changes} as id", f"'r{n}' as v")
        source.createOrReplaceTempView("bench_changes")
        figures["merge"].append(
            _timed(
                spark,
                lambda: spark.sql(
                    f"merge into {TABLE} t using bench_changes c on t.id = c.id "
                    "when matched then update set * when not matched then insert *"
                ),
            )
        )
        if read:
            figures["read"].append(_timed(spark, lambda: spark.table(TABLE).collect()))
            figures["read again"].append(_timed(spark, lambda: spark.table(TABLE).collect()))
    return {kind: values for kind, values in figures.items() if values}


def _line(kind: str, values: list[tuple[float, int]]) -> str:
    steady = values[len(values) // 2 :]
    seconds = statistics.mean(s for s, _ in steady)
    jobs = statistics.mean(j for _, j in steady)
    return f"| {kind} | {seconds:.2f} | {jobs:.1f} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.read_after_merge", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rounds", type=int, default=16, help="MERGEs of each kind (16)")
    parser.add_argument("--rows", type=int, default=100, help="rows of the table (100)")
    parser.add_argument("--changes", type=int, default=3, help="rows of each MERGE (3)")
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting"
    )
    args = parser.parse_args(argv)
    from pyspark_jobs.session import get_spark

    root = Path(tempfile.mkdtemp(prefix="lakehouse-read-after-merge-"))
    settings = Settings(
        lake_root=root,
        master="local[2]",
        config_path=DEFAULT_CONFIG,
        shuffle_partitions=2,
        long_lived=True,
        extra_conf=tuple(parse_conf_pair(text) for text in args.conf),
    )
    spark = get_spark(settings, app_name="read-after-merge")
    spark.sql("create database if not exists bench_read_after_merge")
    # Each kind twice, alternating, the first pair only warming the JVM up: the later
    # of two phases in one JVM would otherwise look cheaper for that alone.
    for read in (False, True):
        _rounds(spark, args.rounds, args.rows, args.changes, read=read)
    without = _rounds(spark, args.rounds, args.rows, args.changes, read=False)
    with_reads = _rounds(spark, args.rounds, args.rows, args.changes, read=True)
    print("| each round (mean of the last half) | seconds | Spark jobs |")
    print("|---|---:|---:|")
    print(_line("merge (rounds without reads)", without["merge"]))
    for kind, values in with_reads.items():
        print(_line(f"{kind} (rounds with reads)", values))
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
