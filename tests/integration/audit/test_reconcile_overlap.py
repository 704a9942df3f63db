"""The reconciliation reads and diffs the next table while GX validates the one before, and frees what it holds."""

from __future__ import annotations

import threading

import pytest

from spark_apps.audit.auditor import _one_ahead

pytestmark = pytest.mark.integration


def upper_noting_when_b_starts(started: threading.Event):
    """A stand-in for a table's diff: the item in capitals, setting ``started`` when the second item's work begins."""
    def compare(item: str) -> str:
        if item == "b":
            started.set()
        return item.upper()
    return compare


def test_the_next_item_is_worked_on_while_the_caller_holds_the_one_before_and_results_keep_their_order(spark):
    second_started = threading.Event()
    released: list[str] = []
    compare = upper_noting_when_b_starts(second_started)

    with _one_ahead(spark, compare, ["a", "b", "c"], released.append) as results:
        first = next(results)
        # Run in turn, "b" would start only once the caller asks for it: this wait would time out.
        assert second_started.wait(timeout=60), "the next item was not worked on while the caller held the first"
        assert [first, *results] == ["A", "B", "C"]
    assert released == [], "a result the caller took is the caller's to free"


def test_a_caller_that_stops_early_gets_the_result_worked_on_ahead_released(spark):
    second_started = threading.Event()
    released: list[str] = []
    compare = upper_noting_when_b_starts(second_started)

    with pytest.raises(RuntimeError, match="validation failed"):
        with _one_ahead(spark, compare, ["a", "b", "c"], released.append) as results:
            next(results)
            assert second_started.wait(timeout=60)
            raise RuntimeError("validation failed")
    assert released == ["B"], "the table diffed ahead kept its cached frames after the run failed"
