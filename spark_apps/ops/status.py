"""`kappa status`: every registered pipeline on one screen, for on-call.

Per pipeline: the stream as the supervisor would judge it now (read only: it starts, writes and pages nothing),
its lag, the newest reconciliation and its verdict, and how many gold tables serve the stream or the batch.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spark_apps.core.settings import Settings
from spark_apps.ops import supervisor
from spark_apps.pipeline.target import Target


@dataclass(frozen=True)
class LastAudit:
    run_id: str
    finished_at: dt.datetime
    success: bool
    failed_tables: tuple[str, ...]


@dataclass(frozen=True)
class PipelineStatus:
    pipeline: str
    stream: supervisor.Health
    last_audit: LastAudit | None
    serving: dict[str, str]  # gold table -> "kappa" | "lambda"

    @property
    def healthy(self) -> bool:
        """What on-call acts on: the stream is up (or was never deployed) and the newest audit, if any, was
        exact."""
        return self.stream.healthy and self.audit_exact

    @property
    def unknown(self) -> bool:
        """Nothing is known to be wrong, but the stream cannot be judged: the log cannot be read."""
        return self.stream.status == "blind" and self.audit_exact

    @property
    def audit_exact(self) -> bool:
        """The newest audit, if any, was exact."""
        return self.last_audit is None or self.last_audit.success


# What `kappa status` exits with, for scripts and monitors (Nagios' OK and UNKNOWN; 2 is a usage error).
EXIT_HEALTHY = 0
EXIT_INCIDENT = 1
EXIT_UNKNOWN = 3


def exit_code(statuses: list[PipelineStatus]) -> int:
    """Healthy when every pipeline is; an incident when one is not and it can be told; else cannot tell."""
    if all(s.healthy for s in statuses):
        return EXIT_HEALTHY
    return EXIT_UNKNOWN if all(s.healthy or s.unknown for s in statuses) else EXIT_INCIDENT


def observe_stream(settings: Settings, target: Target) -> supervisor.Health:
    """The stream's health now, judged as a supervision round would judge it, without its side effects."""
    return supervisor.observe(settings, target, time.time()).health


def last_audit(ledger: list[dict], pipeline: str) -> LastAudit | None:
    """The newest reconciliation run of the pipeline in the ledger's rows; a run fails when any of its rows
    failed."""
    runs: dict[str, list[dict]] = {}
    for row in ledger:
        if row["pipeline"] == pipeline:
            runs.setdefault(row["run_id"], []).append(row)
    if not runs:
        return None
    finished = {run_id: max(r["finished_at"] for r in rows) for run_id, rows in runs.items()}
    run_id = max(finished, key=lambda run: (finished[run], run))
    rows = runs[run_id]
    return LastAudit(run_id, finished[run_id], all(r["success"] for r in rows),
                     tuple(sorted({r["table"] for r in rows if not r["success"]})))


def current_modes(decisions: list[dict], pipeline: str) -> dict[str, str]:
    """Each gold table's serving mode: its newest decision (as ``serving.state.current``)."""
    newest = sorted((d for d in decisions if d["pipeline"] == pipeline), key=lambda d: (d["decided_at"], d["table"]))
    return {d["table"]: d["mode"] for d in newest}


def statuses(settings: Settings, targets: list[Target], spark: Callable[[], Any]) -> list[PipelineStatus]:
    """Every target's status. The ledger and the serving state are read once, from their files (``spark()``
    starts a session only for a table that needs Delta's own reader)."""
    from spark_apps.audit.ledger import LEDGER_TABLE
    from spark_apps.io import delta_snapshot
    from spark_apps.serving.state import SERVING_STATE_TABLE

    ledger = delta_snapshot.rows(settings, LEDGER_TABLE, ["run_id", "pipeline", "table", "finished_at", "success"],
                                 spark)
    decisions = delta_snapshot.rows(settings, SERVING_STATE_TABLE, ["pipeline", "table", "mode", "decided_at"],
                                    spark)
    return [PipelineStatus(t.name, observe_stream(settings, t), last_audit(ledger, t.name),
                           current_modes(decisions, t.name)) for t in targets]


def as_json(status: PipelineStatus) -> dict:
    audit = status.last_audit
    return {"pipeline": status.pipeline, "healthy": status.healthy, "stream": status.stream.status,
            "stream_detail": status.stream.detail, "pid": status.stream.pid, "lag_records": status.stream.lag_records,
            "last_audit": None if audit is None else {
                "run_id": audit.run_id, "finished_at": audit.finished_at.isoformat(), "success": audit.success,
                "failed_tables": list(audit.failed_tables)},
            "serving": status.serving}


def render(statuses: list[PipelineStatus], now: dt.datetime) -> str:
    """One line per pipeline, aligned, worst first: what needs on-call heads the list. ``now`` is on the clock of
    the ledger's timestamps as Spark returns them (naive, the machine's local time)."""
    header = ("PIPELINE", "STREAM", "LAG", "LAST AUDIT", "VERDICT", "SERVING")
    rows = [header] + [_row(s, now) for s in sorted(statuses, key=lambda s: (s.healthy, s.pipeline))]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    details = [f"{s.pipeline}: {s.stream.detail}" for s in statuses if not s.stream.healthy]
    return "\n".join(lines + details)


def _row(status: PipelineStatus, now: dt.datetime) -> tuple[str, ...]:
    lag = "-" if status.stream.lag_records is None else f"{status.stream.lag_records:,}"
    audit = status.last_audit
    if audit is None:
        when, verdict = "never", "-"
    else:
        when = f"{_age(now - audit.finished_at)} ago ({audit.run_id})"
        verdict = "exact" if audit.success else f"FAILED: {', '.join(audit.failed_tables) or 'contract'}"
    stream = "not started" if status.stream.status == "idle" else status.stream.status
    return status.pipeline, stream, lag, when, verdict, _serving_summary(status.serving)


def _serving_summary(modes: dict[str, str]) -> str:
    if not modes:
        return "batch (not yet reconciled)"
    counts = {mode: sum(1 for m in modes.values() if m == mode) for mode in sorted(set(modes.values()))}
    names = {"kappa": "stream", "lambda": "batch"}
    return ", ".join(f"{n} of {len(modes)} from the {names.get(mode, mode)}" for mode, n in counts.items())


def _age(delta: dt.timedelta) -> str:
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h" if seconds < 172800 else f"{seconds // 86400}d"
