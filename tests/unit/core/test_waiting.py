import itertools

import pytest

from spark_apps.core.waiting import WaitTimedOut, poll, wait_for


def test_poll_returns_the_first_truthy_value_of_the_condition():
    answers = iter([None, 0, "", "ready", "later"])
    assert poll(lambda: next(answers), timeout_s=5, every_s=0.001) == "ready"


def test_poll_checks_once_more_at_the_deadline_and_gives_none_when_the_condition_never_holds():
    calls = itertools.count()
    assert poll(lambda: next(calls) < 0, timeout_s=0.01, every_s=0.001) is None
    assert next(calls) >= 2


def test_wait_for_names_what_it_awaited_when_it_times_out():
    with pytest.raises(WaitTimedOut, match="gave up after 0s waiting for the broker to answer"):
        wait_for(lambda: False, "the broker to answer", timeout_s=0.01, every_s=0.001)


def test_wait_for_checks_a_condition_that_already_holds_without_waiting():
    assert wait_for(lambda: 42, "nothing", timeout_s=0) == 42
