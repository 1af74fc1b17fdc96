"""Walk a query plan held by the JVM: its nodes, and the columns its shuffles carry."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame


def seq(items: Any) -> Iterator[Any]:
    """The elements of a Scala ``Seq`` reached through Py4J."""
    for at in range(items.size()):
        yield items.apply(at)


def exchanged_columns(frame: DataFrame) -> set[str]:
    """The columns any shuffle of ``frame``'s physical plan carries (planned without
    adaptive execution, which would place its shuffles only once it runs)."""
    conf = frame.sparkSession.conf
    adaptive = conf.get("spark.sql.adaptive.enabled")
    conf.set("spark.sql.adaptive.enabled", "false")
    try:
        nodes = [frame._jdf.queryExecution().executedPlan()]
    finally:
        conf.set("spark.sql.adaptive.enabled", adaptive)
    found: set[str] = set()
    while nodes:
        node = nodes.pop()
        if "Exchange" in node.nodeName():
            found |= {attribute.name() for attribute in seq(node.output())}
        nodes.extend(seq(node.children()))
    return found
