"""Steps over small tables run without generated code.

Spark generates and compiles Java for every new plan (whole-stage code generation, then
Janino): worth it when the plan then runs over millions of rows, but most of the CPU of a
step that plans dozens of queries over a few thousand (a JFR recording of a warm gold
apply of 20 changes: code generation and compilation a third of its samples). Silver's
build and gold's apply run interpreted when every table they read is at most
``spark.lakehouse.interpretBelowBytes`` (8 MiB unless set; 0 turns it off) by Delta's
own record of its size; bronze's queries when the landing files of the sources it starts
are at most that together (``files_small``). Sizes, not new rows: silver's data tests and
gold's MERGEs read their whole tables, where interpreted plans would cost more than
compiling. A step may add settings of its own that pay only on small tables (gold: MERGEs
that rewrite the few files they touch instead of writing deletion vectors, docs/gold.md).

Measured on the samples' `lakehouse run` on 2 cores, 2026-11-26, before and after on fresh
lakes: 230 s of wall time against 190, 389 s of CPU against 317 (docs/gold.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager

from pyspark.sql import SparkSession

from pyspark_jobs.catalog import table_exists
from pyspark_jobs.delta_log import table_bytes
from pyspark_jobs.session import temporary_conf

THRESHOLD_KEY = "spark.lakehouse.interpretBelowBytes"
DEFAULT_THRESHOLD = 8 * 1024 * 1024
# Whole-stage code generation, and the generated projections and predicates outside it.
_INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


def threshold_bytes(spark: SparkSession) -> int:
    """The size at or under which a step's inputs count as small (0: never)."""
    return int(spark.conf.get(THRESHOLD_KEY, None) or DEFAULT_THRESHOLD)


def all_small(spark: SparkSession, tables: Iterable[str]) -> bool:
    """Whether every existing table of ``tables`` is known to be at most the threshold
    (a table whose size Delta's log does not record counts as large)."""
    threshold = threshold_bytes(spark)
    if threshold <= 0:
        return False
    try:
        for table in tables:  # the first large one ends the look (the change log is first)
            if table_exists(spark, table):
                size = table_bytes(spark, table)
                if size is None or size > threshold:
                    return False
    except Exception:  # noqa: BLE001 - only the choice of plans: the step meets the error itself
        return False
    return True


def files_small(spark: SparkSession, sizes: Iterable[int | None]) -> bool:
    """Whether files of these total sizes (None: unknown, which counts as large) are at
    most the threshold together; no files at all is not small (nothing to plan)."""
    threshold = threshold_bytes(spark)
    known = list(sizes)
    if threshold <= 0 or not known or any(size is None for size in known):
        return False
    return sum(size for size in known if size is not None) <= threshold


@contextmanager
def interpreted_if(
    spark: SparkSession,
    small: bool,
    step: str,
    log: Callable[[str], None] | None = None,
    small_conf: Mapping[str, str] | None = None,
    inputs: str = "small tables",
) -> Iterator[bool]:
    """Run the block without code generation when ``small``, saying so on ``log`` when
    given; yields ``small``. ``small_conf``: more settings the step wants only on small
    inputs. The session's own settings come back after the block."""
    if not small:
        yield False
        return
    if log is not None:
        log(f"{step}: {inputs}, planned without code generation")
    with temporary_conf(spark, {**_INTERPRETED, **(small_conf or {})}):
        yield True


@contextmanager
def interpreted_when_small(
    spark: SparkSession,
    step: str,
    tables: Iterable[str],
    log: Callable[[str], None] | None = None,
    small_conf: Mapping[str, str] | None = None,
) -> Iterator[bool]:
    """Run the block without code generation when every table the step reads is small
    (``all_small``): ``interpreted_if`` on the tables' sizes."""
    with interpreted_if(spark, all_small(spark, tables), step, log, small_conf) as small:
        yield small
