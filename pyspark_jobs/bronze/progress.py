"""One progress line per source and micro-batch: records read, landed, quarantined, lag.

The counts come from the batch writer; the Kafka lag from the streaming query's own
progress report (``sources[0].metrics.maxOffsetsBehindLatest``: how many offsets the
partition furthest behind still had to go when the batch was planned). Progress reports
are written by the stream thread before the next batch starts, so reading
``query.recentProgress`` after each batch (or after the query ends) sees every batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class BatchCounts:
    """What the writer did with one micro-batch."""

    read: int
    landed: int
    quarantined: int


@dataclass
class SourceIngest:
    """What one source's ingest did in this run."""

    source: str
    batches: dict[int, BatchCounts] = field(default_factory=dict)
    lag: dict[int, int] = field(default_factory=dict)
    reported: set[int] = field(default_factory=set)
    # No query was started: the landing folder had no file the checkpoint had not read.
    skipped: bool = False

    @property
    def read(self) -> int:
        return sum(b.read for b in self.batches.values())

    @property
    def landed(self) -> int:
        return sum(b.landed for b in self.batches.values())

    @property
    def quarantined(self) -> int:
        return sum(b.quarantined for b in self.batches.values())


def kafka_lag(progress: Mapping[str, Any]) -> int | None:
    """Offsets still behind the latest after this batch's plan, from a Kafka progress report.

    >>> kafka_lag({"sources": [{"metrics": {"maxOffsetsBehindLatest": "3"}}]})
    3
    """
    for source in progress.get("sources") or ():
        value = (source.get("metrics") or {}).get("maxOffsetsBehindLatest")
        if value is not None:
            return int(float(value))
    return None


def batch_line(report: SourceIngest, batch_id: int) -> str:
    """The progress line of one batch."""
    counts = report.batches[batch_id]
    line = (
        f"bronze {report.source}: batch {batch_id}: read {counts.read}, "
        f"landed {counts.landed}, quarantined {counts.quarantined}"
    )
    if batch_id in report.lag:
        line += f", lag {report.lag[batch_id]} offsets"
    return line


def new_lines(report: SourceIngest, progresses: Sequence[Any]) -> list[str]:
    """Lines for batches written and reported by the query since the last call.

    ``progresses`` is ``query.recentProgress``: PySpark's progress objects read like the
    JSON report (``progress["batchId"]``).
    """
    lines = []
    for progress in progresses:
        batch_id = int(progress["batchId"])
        if batch_id in report.reported or batch_id not in report.batches:
            continue
        lag = kafka_lag(progress)
        if lag is not None:
            report.lag[batch_id] = lag
        report.reported.add(batch_id)
        lines.append(batch_line(report, batch_id))
    return lines


def remaining_lines(report: SourceIngest) -> list[str]:
    """Lines for written batches the query never reported (it was stopped right after)."""
    lines = []
    for batch_id in sorted(set(report.batches) - report.reported):
        report.reported.add(batch_id)
        lines.append(batch_line(report, batch_id))
    return lines
