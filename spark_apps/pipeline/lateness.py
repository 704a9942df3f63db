"""When an event is late: a pipeline's own rule, with the platform's setting as its default.

A late event is kept in silver, flagged, listed in ``late_events`` and left out of every gold table. What it is
late *against* is the pipeline's choice, and both choices are read from the log alone, so the stream and a batch
recompute of the same prefix always flag the same events:

- ``append_time`` (the default): late when the broker appended the record more than ``allowed_s`` after the event's
  own time. Right for live events; a backfill of last year's events is then late from its first record.
- ``high_water_mark``: late when the event's time is more than ``allowed_s`` before the high-water mark of its
  partition, the greatest event time of the valid records before it in that partition, in offset order. A history
  loaded in roughly time order is on time, and so are live events after it; a record that arrives after later ones
  and falls behind them by more than ``allowed_s`` is late. The first record of a partition is never late. Records
  stamped in the future (beyond ``KAPPA_FUTURE_SKEW_S`` after their append time) do not raise the mark, so one bad
  clock cannot make every later event late.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_apps.core.errors import PlatformError

APPEND_TIME = "append_time"
HIGH_WATER_MARK = "high_water_mark"
RULES = (APPEND_TIME, HIGH_WATER_MARK)
# The share of a file's first events, late under the append-time rule, from which the file is a history: the
# producer asks for --accept-late before sending it, and `kappa init` drafts the high-water-mark rule.
HISTORY_LATE_SHARE = 0.5


def is_history(timed: int, late: int) -> bool:
    """Whether a file whose first ``timed`` events with a readable time hold ``late`` ones that the append-time
    rule would flag is a history (``HISTORY_LATE_SHARE``)."""
    return timed > 0 and late >= HISTORY_LATE_SHARE * timed


@dataclass(frozen=True)
class LatenessRule:
    """The rule in force: what a pipeline declared, completed from the settings."""

    allowed_s: int
    against: str = APPEND_TIME
    future_skew_s: int = 300

    @property
    def uses_high_water_mark(self) -> bool:
        return self.against == HIGH_WATER_MARK


@dataclass(frozen=True)
class Lateness:
    """A pipeline's declaration: ``allowed_s`` (None: ``KAPPA_ALLOWED_LATENESS_S``) and what it is measured
    against (``append_time`` or ``high_water_mark``)."""

    allowed_s: int | None = None
    against: str = APPEND_TIME

    def __post_init__(self) -> None:
        if self.against not in RULES:
            raise PlatformError(f"lateness against {self.against!r}: choose one of {', '.join(RULES)}")
        if self.allowed_s is not None and self.allowed_s < 0:
            raise PlatformError(f"allowed lateness must be >= 0 seconds, got {self.allowed_s}")

    def rule(self, settings) -> LatenessRule:
        allowed = settings.allowed_lateness_s if self.allowed_s is None else self.allowed_s
        return LatenessRule(allowed, self.against, settings.future_skew_s)
