"""An alert to on-call, as every part of the platform raises it and every sink delivers it: the data alone, so the
sinks and the dispatcher both import it and neither imports the other."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field
from typing import Any

RUNBOOK = "docs/runbook.md"
SEVERITIES = ("critical", "error", "warning", "info")  # PagerDuty's; severity-based urgency pages on the first two


def runbook(anchor: str) -> str:
    """The link to the runbook section for one kind of alert (a ``## <anchor>`` heading of docs/runbook.md)."""
    return f"{RUNBOOK}#{anchor}"


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _new_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Alert:
    """One condition on-call must act on; its ``alert_id`` keeps it one row however often it is recorded."""

    severity: str  # one of SEVERITIES
    summary: str
    source: str
    dedup_key: str
    table: str = ""
    offsets: dict[int, int] = field(default_factory=dict)  # partition -> log offset
    versions: dict[str, int] = field(default_factory=dict)  # table -> Delta version
    details: dict = field(default_factory=dict)
    runbook: str = RUNBOOK
    alert_id: str = field(default_factory=_new_id)
    raised_at: dt.datetime = field(default_factory=_utc_now)
    resolves: bool = False  # the condition of ``dedup_key`` has cleared: PagerDuty resolves the incident

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"alert severity must be one of {', '.join(SEVERITIES)}, got {self.severity!r}")
        if not self.summary or not self.dedup_key:
            raise ValueError("an alert needs a summary and a dedup key")

    def as_json(self) -> dict[str, Any]:
        """The alert as JSON values: ISO timestamp, string map keys."""
        return {"alert_id": self.alert_id, "raised_at": self.raised_at.isoformat(), "severity": self.severity,
                "summary": self.summary, "source": self.source, "dedup_key": self.dedup_key, "table": self.table,
                "offsets": {str(p): int(o) for p, o in self.offsets.items()},
                "versions": {str(t): int(v) for t, v in self.versions.items()},
                "details": self.details, "runbook": self.runbook, "action": "resolve" if self.resolves else "trigger"}


def resolution(dedup_key: str, source: str, summary: str) -> Alert:
    """The alert that closes the incident of ``dedup_key``: info to the chat sinks, a resolve to PagerDuty."""
    return Alert(severity="info", summary=f"resolved: {summary}", source=source, dedup_key=dedup_key, resolves=True)
