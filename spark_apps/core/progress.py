"""Progress for long work: a live line on a terminal, a periodic log line otherwise."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TextIO


@contextmanager
def timed(seconds: dict[str, float], phase: str) -> Iterator[None]:
    """Add the time the block takes to ``seconds[phase]``, even when it raises."""
    started = time.monotonic()
    try:
        yield
    finally:
        seconds[phase] = seconds.get(phase, 0.0) + time.monotonic() - started


def phase_times(seconds: Mapping[str, float]) -> str:
    """What ``timed`` measured, for a log line: ``read 3.0s, write 24.9s``."""
    return ", ".join(f"{phase} {spent:.1f}s" for phase, spent in seconds.items())


class Progress:
    """Reports ``done/total`` with a rate; cheap enough to call for every record."""

    def __init__(self, label: str, total: int | None, stream: TextIO | None = None,
                 interval_s: float | None = None) -> None:
        self.label = label
        self.total = total
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.interval_s = interval_s if interval_s is not None else (0.5 if self.live else 5.0)
        self.started = time.monotonic()
        self._next_report = self.started + self.interval_s
        self.done = 0

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if now >= self._next_report:
            self._next_report = now + self.interval_s
            self._write(now)

    def close(self) -> None:
        self._write(time.monotonic())
        if self.live:
            self.stream.write("\n")
        self.stream.flush()

    def _write(self, now: float) -> None:
        elapsed = max(now - self.started, 1e-9)
        if self.total:
            share = f"{self.done:,}/{self.total:,} ({100 * self.done / self.total:.0f}%)"
        else:
            share = f"{self.done:,}"
        line = f"{self.label}: {share}, {self.done / elapsed:,.0f}/s, {elapsed:.1f}s"
        self.stream.write(("\r" + line) if self.live else (line + "\n"))
        self.stream.flush()
