"""`kappa status`: every registered pipeline on one screen, for on-call.

Per pipeline: the stream as the supervisor would judge it now (read only: it starts, writes and pages nothing),
its lag, the newest reconciliation and its verdict, and how many gold tables serve the stream or the batch.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass

from spark_apps.core.settings import Settings
from spark_apps.ops import supervisor
from spark_apps.pipeline.declaration import Pipeline
from spark_apps.target.resolution import Target


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
        """What on-call acts on: the stream is up and the newest audit (if any) was exact."""
        return self.stream.healthy and (self.last_audit is None or self.last_audit.success)


def observe_stream(settings: Settings, target: Target) -> supervisor.Health:
    """The stream's health now, judged as a supervision round would judge it, without its side effects."""
    return supervisor.observe(settings, target, time.time()).health


def last_audit(spark, settings: Settings, pipeline: Pipeline) -> LastAudit | None:
    """The newest reconciliation run of the pipeline in the ledger; a run fails when any of its rows failed."""
    from pyspark.sql import functions as F

    from spark_apps.audit.ledger import LEDGER_TABLE
    from spark_apps.io.catalog import read_if_present

    ledger = read_if_present(spark, settings, LEDGER_TABLE)
    if ledger is None:
        return None
    runs = (ledger.where(F.col("pipeline") == pipeline.name)
            .groupBy("run_id")
            .agg(F.max("finished_at").alias("finished_at"), F.min(F.col("success").cast("int")).alias("success"),
                 F.sort_array(F.collect_set(F.when(~F.col("success"), F.col("table")))).alias("failed"))
            .orderBy(F.col("finished_at").desc(), F.col("run_id").desc()).limit(1).collect())
    if not runs:
        return None
    run = runs[0]
    return LastAudit(run.run_id, run.finished_at, bool(run.success), tuple(run.failed))


def pipeline_status(spark, settings: Settings, target: Target) -> PipelineStatus:
    from spark_apps.serving import state as serving

    return PipelineStatus(target.name, observe_stream(settings, target), last_audit(spark, settings, target.pipeline),
                          serving.current_modes(spark, settings, target.name))


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
    return status.pipeline, status.stream.status, lag, when, verdict, _serving_summary(status.serving)


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
