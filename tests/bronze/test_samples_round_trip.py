"""Every bundled landing sample lands in bronze line for line, each value byte for byte."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import SparkSession

from pyspark_jobs.bronze.ingest import ingest
from pyspark_jobs.config import Source, load_config
from pyspark_jobs.settings import DEFAULT_CONFIG, Settings
from tests.bronze.conftest import bronze_rows, quarantine_rows
from tests.conftest import reset_lake

# Read at collection time so each source of the committed config is its own test.
CONFIG = load_config(DEFAULT_CONFIG)
LANDING_SOURCES = [s for s in CONFIG.sources if s.landing is not None]
_VALUE_FIELD = re.compile(r'"value"\s*:\s*')


def raw_value_text(line: str) -> str | None:
    """The line's own text of its top-level ``value`` (a JSON string: the string itself)."""
    value = json.loads(line)["value"]
    if value is None or isinstance(value, str):
        return value
    decoder = json.JSONDecoder()
    for match in _VALUE_FIELD.finditer(line):
        try:
            decoded, end = decoder.raw_decode(line, match.end())
        except json.JSONDecodeError:
            continue
        if decoded == value and line[end:].strip() == "}":
            return line[match.end() : end]
    raise AssertionError(f"no top-level value found in {line[:200]}")


def _lines(source: Source) -> Iterator[str]:
    assert source.landing is not None
    for path in sorted(source.landing.rglob("*.jsonl")):
        yield from (line for line in path.read_text().splitlines() if line.strip())


@pytest.fixture(scope="module")
def samples_ingested(spark: SparkSession, settings: Settings) -> Settings:
    """All bundled landing samples ingested once into an emptied lake."""
    reset_lake(spark, settings)
    ingest(spark, settings, CONFIG, log=lambda _: None)
    return settings


@pytest.mark.parametrize("source", LANDING_SOURCES, ids=[s.name for s in LANDING_SOURCES])
def test_sample_lands_line_for_line_byte_exact(
    spark: SparkSession, samples_ingested: Settings, source: Source
) -> None:
    expected: list[tuple[Any, ...]] = []
    for line in _lines(source):
        record = json.loads(line)
        expected.append(
            (record["topic"], record["partition"], record["offset"], raw_value_text(line))
        )
    got = sorted(((t, p, o, v) for t, p, o, _, v in bronze_rows(spark, source.name)), key=repr)
    assert len(got) == len(expected) > 0
    assert got == sorted(expected, key=repr)
    assert quarantine_rows(spark, source.name) == []
