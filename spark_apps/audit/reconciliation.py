"""One reconciliation as a use case: run the auditor, or reuse the run already in the ledger under that run id.

A scheduler names its run (``kappa_<pipeline>_reconcile.<logical date>``): a rerun of the same logical date, after
a crash or a retry, finds the reconciliation in ``audit.reconciliation_ledger`` and reports it instead of recomputing.
The CLI, the demo, the bench and a replay's reconciliation all go through :func:`reconcile_or_reuse`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from spark_apps.audit import ledger
from spark_apps.audit.auditor import audit, summary_lines
from spark_apps.audit.verdict import AuditRun
from spark_apps.core.paths import report_path
from spark_apps.core.settings import Settings
from spark_apps.pipeline.target import Target


@dataclass(frozen=True)
class Reconciliation:
    """A reconciliation run as the ledger recorded it.

    ``summary``: :func:`ledger.run_summary` of its rows; ``run``: the auditor's run when it was computed now
    (``None`` when ``reused`` from the ledger); ``lines``: what to print about a fresh run.
    """

    run_id: str
    reused: bool
    summary: dict
    report: Path
    run: AuditRun | None = None

    @property
    def success(self) -> bool:
        return bool(self.summary["success"])

    @property
    def lines(self) -> list[str]:
        if self.run is None:
            return [f"reconciliation {self.run_id} is already in the ledger; nothing recomputed"]
        return summary_lines(self.run)

    def as_json(self) -> dict:
        """The outcome a ``--json`` file and an Airflow task read."""
        return {**self.summary, "reused": self.reused, "report": str(self.report)}


def reconcile_or_reuse(spark, settings: Settings, target: Target, *,
                       run_id: str | None = None, table: str | None = None, version: int | None = None,
                       only: list[str] | None = None, as_of: dt.datetime | None = None,
                       kind: str = ledger.FULL) -> Reconciliation:
    """Reuse the run ``run_id`` if the ledger has it (whatever the other arguments), else audit now under that id
    (a fresh id when none is given)."""
    rows = ledger.run_rows(spark, settings, run_id) if run_id else []
    run = None
    if not rows:
        run = audit(spark, settings, target, table=table, version=version, only=only, run_id=run_id,
                    as_of=as_of, kind=kind)
        rows = ledger.run_rows(spark, settings, run.run_id)
    summary = ledger.run_summary(rows)
    return Reconciliation(summary["run_id"], run is None, summary,
                          report_path(settings, target.name, summary["run_id"]), run)
