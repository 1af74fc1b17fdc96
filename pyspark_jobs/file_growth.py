"""When a table is due for compaction between two cycles of ``lakehouse run --every``:
once it gained a threshold of data files since the loop last compacted it.

Every cycle adds a file or two to each table it writes, and what reads whole tables
(silver's insert and its tests, the gates' counts) slows with the files: on the bench
lake a one-table cycle took 23.8 s after about 230 cycles and 20.5 s right after
``lakehouse maintain`` (docs/performance.md). A full maintenance costs minutes (VACUUM
lists every folder) and Delta's auto compaction compacts at every write (about 3 s a
cycle); the loop compacts a table once per ``threshold`` new files instead
(``maintain.compact_grown_tables``), counting them in each table's Delta log.

Off unless asked for (``run --every --compact-files N``): the count itself costs about
0.5 s a cycle on 2 cores (a catalog listing and a log listing per table), and its gain
could not be measured apart from the machine's drift yet (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# The threshold the docs suggest: what Delta's own auto compaction waits for in a
# partition (``spark.databricks.delta.autoCompact.minNumFiles``).
SUGGESTED_THRESHOLD = 50


@dataclass
class FileGrowth:
    """Each table's data files when the loop last compacted it (0 before that), and the
    growth that makes it due: ``threshold`` files or more."""

    threshold: int
    compacted_at: dict[str, int] = field(default_factory=dict)

    def due(self, files: Mapping[str, int]) -> list[str]:
        """The tables of ``files`` (table -> its data files now) due for compaction, in
        name order. A table with fewer files than at its last compaction (another
        process compacted or rewrote it) counts from there."""
        for table, count in files.items():
            if count < self.compacted_at.get(table, 0):
                self.compacted_at[table] = count
        return sorted(
            t for t, n in files.items() if n - self.compacted_at.get(t, 0) >= self.threshold
        )

    def compacted(self, table: str, files: int) -> None:
        """``table`` holds ``files`` data files after its compaction. A table that cannot
        get fewer (one file per partition) is due again only after as many new ones."""
        self.compacted_at[table] = files
