"""One way to wait for something: poll a condition until it holds or a deadline passes, never a bare sleep.

Services use it to wait for a process to answer or to be gone, the chaos lab for a stream to reach a stage,
and the tests for every condition they wait on, so a timeout always says what was awaited.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from spark_apps.core.errors import PlatformError

T = TypeVar("T")


class WaitTimedOut(PlatformError):
    """The awaited condition did not hold within its deadline."""


def poll(condition: Callable[[], T], timeout_s: float, every_s: float = 0.5) -> T | None:
    """The condition's first truthy value, checked every ``every_s``; None once ``timeout_s`` has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(min(every_s, max(deadline - time.monotonic(), 0.0)))


def wait_for(condition: Callable[[], T], what: str, timeout_s: float, every_s: float = 0.5) -> T:
    """Like :func:`poll`, but a timeout raises :class:`WaitTimedOut` naming ``what`` was awaited."""
    value = poll(condition, timeout_s, every_s)
    if not value:
        raise WaitTimedOut(f"gave up after {timeout_s:.0f}s waiting for {what}")
    return value
