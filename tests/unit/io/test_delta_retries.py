"""Delta commit conflicts are retried with back-off; other errors are not (no Spark needed)."""

import pytest
from delta.exceptions import ConcurrentDeleteReadException

from spark_apps.io.delta_writes import with_retries


def test_a_conflicting_commit_is_retried_three_times_then_raised(caplog):
    calls, pauses = [], []

    def conflicting():
        calls.append(1)
        raise ConcurrentDeleteReadException("a concurrent MERGE removed a file this OPTIMIZE read")

    with pytest.raises(ConcurrentDeleteReadException):
        with_retries(conflicting, "OPTIMIZE silver.events", sleep=pauses.append)
    assert len(calls) == 4 and pauses == [1, 2, 4]
    assert [r.getMessage().split("; ")[1] for r in caplog.records] == ["retry 1 of 3", "retry 2 of 3", "retry 3 of 3"]


def test_a_conflict_that_clears_returns_the_result_and_other_errors_are_not_retried():
    attempts = iter([ConcurrentDeleteReadException("conflict"), "done"])

    def flaky():
        outcome = next(attempts)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def broken():
        raise ValueError("not a Delta table")

    assert with_retries(flaky, "OPTIMIZE gold.order_status", sleep=lambda _: None) == "done"
    with pytest.raises(ValueError):
        with_retries(broken, "VACUUM gold.order_status", sleep=lambda _: pytest.fail("retried a non-conflict"))
