"""``benchmarks.step_times``: timing the pipeline's functions where its modules hold them."""

from __future__ import annotations

import sys
import time

from benchmarks.step_times import medians, timed_functions


def nap(seconds: float) -> str:
    time.sleep(seconds)
    return "awake"


def test_a_function_is_timed_where_a_module_holds_it_and_put_back_after() -> None:
    here = sys.modules[__name__]
    original = here.nap
    with timed_functions([(__name__, "nap")], package=__name__.split(".")[0]) as spent:
        assert here.nap is not original
        assert here.nap(0.02) == "awake"
        here.nap(0.01)
    assert here.nap is original
    assert 0.03 <= spent[f"{__name__.rsplit('.', 1)[-1]}.nap"] < 1


def test_medians_count_a_step_a_cycle_missed_as_zero_and_sort_largest_first() -> None:
    assert medians([{"a": 1.0, "b": 3.0}, {"a": 2.0}, {"a": 3.0, "b": 5.0}]) == {
        "b": 3.0,
        "a": 2.0,
    }
