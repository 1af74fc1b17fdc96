"""The fold registry: how each family of gold tables turns new changes into net states.

A table's family is decided once (``table_specs.family_name``); each family declares
whether it re-folds touched keys from their full history, its fold (every fold takes the
same ``FoldInputs`` and returns net states for all its tables at once), the events a
key's history is made of, and the states after each event (for SCD2 history).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame

from pyspark_jobs.gold.folds.cells import cell_states, fold_cells
from pyspark_jobs.gold.folds.documents import document_states, fold_documents
from pyspark_jobs.gold.folds.events import own_events, rows_of_touched_keys
from pyspark_jobs.gold.folds.graph import fold_graph, graph_states
from pyspark_jobs.gold.folds.graph_events import graph_events, graph_history_rows
from pyspark_jobs.gold.folds.inputs import FoldInputs
from pyspark_jobs.gold.folds.rows import fold_rows, row_states

__all__ = ["FAMILIES", "FoldFamily", "FoldInputs"]


@dataclass(frozen=True)
class FoldFamily:
    """How one family of tables folds.

    - ``refolds``: touched keys are re-folded from their full history in the change log
      (ops that do not commute), so the fold reads ``FoldInputs.histories``;
    - ``derives_events``: a key's history holds events derived from other keys' changes
      (TigerGraph cascades and implicit vertices), so every table of a source folds
      together;
    - ``history_rows``: the change log (of the family's tables), its specs and the new
      rows -> the rows the histories of the affected keys are made of;
    - ``fold``: ``FoldInputs`` -> net states of every table of the family;
    - ``events``: change-log rows (of the family's sources) and specs -> the events keys'
      histories are made of (derived events included);
    - ``states``: sorted histories and specs -> each key's state after every event.
    """

    name: str
    refolds: bool
    derives_events: bool
    history_rows: Callable[[DataFrame, DataFrame, DataFrame], DataFrame]
    fold: Callable[[FoldInputs], DataFrame]
    events: Callable[[DataFrame, DataFrame], DataFrame]
    states: Callable[[DataFrame, DataFrame], DataFrame]


FAMILIES: dict[str, FoldFamily] = {
    family.name: family
    for family in (
        FoldFamily("rows", False, False, rows_of_touched_keys, fold_rows, own_events, row_states),
        FoldFamily(
            "cells", False, False, rows_of_touched_keys, fold_cells, own_events, cell_states
        ),
        FoldFamily("graph", True, True, graph_history_rows, fold_graph, graph_events, graph_states),
        FoldFamily(
            "document",
            True,
            False,
            rows_of_touched_keys,
            fold_documents,
            own_events,
            document_states,
        ),
    )
}
