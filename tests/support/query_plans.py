"""Walk a query plan held by the JVM: its nodes, and the columns its shuffles carry."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame


def seq(items: Any) -> Iterator[Any]:
    """The elements of a Scala ``Seq`` reached through Py4J."""
    for at in range(items.size()):
        yield items.apply(at)


def _physical_nodes(frame: DataFrame) -> Iterator[Any]:
    """Every node of ``frame``'s physical plan, planned without adaptive execution (which
    would place its shuffles, and reuse them, only once it runs)."""
    conf = frame.sparkSession.conf
    adaptive = conf.get("spark.sql.adaptive.enabled")
    conf.set("spark.sql.adaptive.enabled", "false")
    try:
        nodes = [frame._jdf.queryExecution().executedPlan()]
    finally:
        conf.set("spark.sql.adaptive.enabled", adaptive)
    while nodes:
        node = nodes.pop()
        yield node
        nodes.extend(seq(node.children()))


def exchanged_columns(frame: DataFrame) -> set[str]:
    """The columns any shuffle of ``frame``'s physical plan carries."""
    found: set[str] = set()
    for node in _physical_nodes(frame):
        if "Exchange" in node.nodeName():
            found |= {attribute.name() for attribute in seq(node.output())}
    return found


def leaves(frame: DataFrame) -> list[Any]:
    """The leaves of ``frame``'s physical plan (its scans), a reused shuffle left out."""
    return [
        node
        for node in _physical_nodes(frame)
        if node.children().isEmpty() and "Reused" not in node.nodeName()
    ]


def scans_with(frame: DataFrame, column: str) -> int:
    """How many leaves of ``frame``'s physical plan read a relation with ``column`` (a
    reused shuffle is a leaf of its own and does not count)."""
    return sum(
        1
        for node in leaves(frame)
        if column in {attribute.name() for attribute in seq(node.output())}
    )
