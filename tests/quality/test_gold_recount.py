"""Which gold tables the gold gate counts again (``gate_reuse.tables_to_recount``): those
whose version or share of the tombstone and pending tables changed since its last pass,
and none of the stored rows when anything else changed."""

from __future__ import annotations

import copy
from typing import Any

from pyspark_jobs.quality.gate_reuse import tables_to_recount

INPUTS: dict[str, Any] = {
    "layer": "gold",
    "tables": {
        "gold.users": "u@3",
        "gold.orders": "o@5",
        "lakehouse.gold_tombstones": "t@7",
        "lakehouse.gold_pending": "p@9",
    },
    "config": "c",
    "definitions": "d",
    "code": "k",
}
SLICES = {"gold.users": "users-1", "gold.orders": ""}


def passed(inputs: dict[str, Any] = INPUTS, slices: Any = SLICES) -> dict[str, Any]:
    rows = [{"table": "gold.orders", "rows": 2}, {"table": "gold.users", "rows": 1}]
    record = {
        "inputs": inputs,
        "result": {"run_name": "r1", "success": True, "checkpoints": [{"rows": rows}]},
    }
    if slices is not None:
        record["slices"] = slices
    return record


def changed(**tables: str) -> dict[str, Any]:
    inputs = copy.deepcopy(INPUTS)
    inputs["tables"].update(tables)
    return inputs


def test_nothing_changed_counts_nothing_again():
    assert tables_to_recount(passed(), INPUTS, SLICES) == []


def test_a_new_version_of_a_gold_table_counts_that_table_only():
    assert tables_to_recount(passed(), changed(**{"gold.users": "u@4"}), SLICES) == ["gold.users"]


def test_a_table_dropped_and_created_again_is_counted_again():
    assert tables_to_recount(passed(), changed(**{"gold.orders": "x@5"}), SLICES) == ["gold.orders"]


def test_new_shared_versions_count_only_the_tables_whose_share_changed():
    inputs = changed(**{"lakehouse.gold_tombstones": "t@8", "lakehouse.gold_pending": "p@10"})
    assert tables_to_recount(passed(), inputs, SLICES) == []
    slices = {"gold.users": "users-1", "gold.orders": "orders-1"}
    assert tables_to_recount(passed(), inputs, slices) == ["gold.orders"]
    # A table's share that is gone is a change too (the last run staged it, this one not).
    assert tables_to_recount(passed(), inputs, {**SLICES, "gold.users": ""}) == ["gold.users"]


def test_a_table_the_stored_rows_do_not_have_is_counted():
    slices = {**SLICES, "gold.new": ""}
    assert tables_to_recount(passed(), INPUTS, slices) == ["gold.new"]


def test_no_row_is_taken_when_anything_else_changed():
    for key in ("layer", "config", "definitions", "code"):
        assert tables_to_recount(passed(), {**INPUTS, key: "other"}, SLICES) is None, key
    # A record kept before slices were (or by a layer without them).
    assert tables_to_recount(passed(slices=None), INPUTS, SLICES) is None
