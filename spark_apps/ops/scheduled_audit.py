"""The scheduled reconciliation as one use case: if due, reconcile (or reuse the run), then advance serving.

What ``kappa reconcile`` does, what the hourly ``kappa_<pipeline>_reconcile`` DAG runs (through that command) and
what the demo runs:

1. a run id already in the ledger (an Airflow rerun of the same logical date) is reused, never recomputed, and
   never skipped: the rerun reports what the first attempt decided;
2. else, when asked (``if_due``), the batch audits only if it is due *at* ``as_of`` (:func:`audit_due`);
3. the auditor reconciles the active generation, which the caller resolved
   (:func:`spark_apps.audit.reconciliation.reconcile_or_reuse`);
4. when asked (``serve``), the serving state machine applies the verdict to every gold table.

``as_of`` is the moment the run stands for: the end of an Airflow run's data interval (``--as-of``). It chooses
both the stream batch the auditor aligns on and the moment at which "is an audit due?" is answered, so a run
decides the same however late it starts, and a rerun decides as its first attempt did. Without an ``as_of``
(an operator's manual ``kappa reconcile --if-due``) the run stands for the moment it is called: the wall clock
then, read once, in :func:`due_at`.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from spark_apps.alerts.alert import Alert, runbook
from spark_apps.alerts.dispatch import dispatch, resolve
from spark_apps.audit import ledger
from spark_apps.audit.reconciliation import Reconciliation, reconcile_or_reuse
from spark_apps.core.errors import first_line
from spark_apps.core.object_path import ObjectStoreUnavailable
from spark_apps.core.settings import Settings
from spark_apps.pipeline.target import Target
from spark_apps.serving import state
from spark_apps.serving.state import LAMBDA, Decision

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Due:
    """Whether the batch audits at a given moment, and why (printed when a run skips)."""

    due: bool
    reason: str


@dataclass(frozen=True)
class ScheduledReconciliation:
    """The outcome of :func:`reconcile`: skipped (with ``due``'s reason), or a reconciliation and, when serving
    was advanced, its decisions."""

    pipeline: str
    reconciliation: Reconciliation | None
    due: Due | None = None
    decisions: tuple[Decision, ...] = ()
    overview: Path | None = None  # the pipeline's overview page, with this run in it

    @property
    def skipped(self) -> bool:
        return self.reconciliation is None

    def as_json(self) -> dict:
        """What ``kappa reconcile --json`` writes and the reconcile DAG's later tasks read: the verdict and, when
        serving was advanced, each gold table's decision (as ``kappa serving advance --json`` writes them)."""
        if self.reconciliation is None:
            return {"skipped": True, "reason": self.due.reason if self.due else ""}
        return {**self.reconciliation.as_json(), "decisions": [d.as_json() for d in self.decisions],
                "overview": str(self.overview or "")}


# ---- pure ------------------------------------------------------------------------------------------------------

def audit_due(modes: Mapping[str, str], gold_tables: Sequence[str], last_run_at: dt.datetime | None,
              as_of: dt.datetime, every_s: float) -> Due:
    """Whether the batch audits at ``as_of``: always while any gold table serves the batch snapshot (``lambda``)
    or before the first audit; once every table serves the stream, when the last audit (``last_run_at``, the
    moment it stood for, at or before ``as_of``) is at least ``every_s`` seconds older than ``as_of``.

    Naive times (as Spark returns them) are local times; aware ones are compared as the instants they are.
    """
    lambda_tables = [t for t in gold_tables if modes.get(t, LAMBDA) == LAMBDA]
    if lambda_tables or last_run_at is None:
        return Due(True, f"{', '.join(lambda_tables) or 'no table'} served from the batch snapshot; audit every run")
    age = as_of.timestamp() - last_run_at.timestamp()  # .timestamp() reads a naive time as local
    if age >= every_s:
        return Due(True, f"every gold table serves the stream; the last audit is {age:.0f}s old, audit now")
    return Due(False, f"every gold table serves the stream; the last audit is {age:.0f}s old, the next is due "
                      f"after {every_s:.0f}s")


# ---- I/O -------------------------------------------------------------------------------------------------------

def due_at(spark, settings: Settings, target: Target, as_of: dt.datetime | None = None) -> Due:
    """:func:`audit_due` for the target's gold tables, from the serving state and the ledger as of ``as_of``
    (default: now, the wall clock, for a run that stands for the moment it is called)."""
    when = as_of if as_of is not None else dt.datetime.now(dt.UTC)
    gold = [target.pipeline.tables().gold(g.name) for g in target.pipeline.gold_tables]
    return audit_due(state.current_modes(spark, settings, target.name), gold,
                     state.last_audit_at(spark, settings, target, at_or_before=when), when,
                     settings.kappa_audit_every_s)


def reconcile(spark, settings: Settings, target: Target, *, run_id: str | None = None,
              as_of: dt.datetime | None = None, if_due: bool = False, serve: bool = True, table: str | None = None,
              version: int | None = None, only: list[str] | None = None, kind: str = "full") -> ScheduledReconciliation:
    """Reconcile ``target``, the active generation of its pipeline (see the module's docstring for the steps)."""
    pipeline = target.pipeline
    due = None
    if if_due and not (run_id and ledger.run_rows(spark, settings, run_id)):
        due = due_at(spark, settings, target, as_of)
        if not due.due:
            return ScheduledReconciliation(pipeline.name, None, due)
    reconciliation = reconcile_or_reuse(spark, settings, target, run_id=run_id, table=table, version=version,
                                        only=only, as_of=as_of, kind=kind)
    decisions = tuple(state.advance(spark, settings, pipeline, reconciliation.run_id)) if serve else ()
    resolve(settings, storage_key(pipeline.name), f"reconcile {pipeline.name}",
            f"the audit of {pipeline.name} read and wrote the object store again", spark)
    return ScheduledReconciliation(pipeline.name, reconciliation, due, decisions, _overview(spark, settings, target))


def storage_key(pipeline: str) -> str:
    return f"storage:{pipeline}"


@contextmanager
def object_store_watched(settings: Settings, pipeline: str) -> Iterator[None]:
    """An audit that cannot reach the object store its tables live on is refused, and pages: nothing proves the
    stream meanwhile. The page goes out without Spark (the alerts table is on that store too); the outbox keeps it
    for the next command that can record it."""
    try:
        yield
    except ObjectStoreUnavailable as exc:
        dispatch(settings, Alert(
            severity="critical", summary=f"the audit of {pipeline} was refused: {exc}",
            source=f"reconcile {pipeline}", dedup_key=storage_key(pipeline),
            details={"warehouse": str(settings.warehouse_dir), "endpoint": settings.s3_endpoint},
            runbook=runbook("object-store-unavailable")))
        raise


def _overview(spark, settings: Settings, target: Target) -> Path | None:
    """The pipeline's overview, rewritten with this run in it; a page that cannot be written is logged, not raised:
    the verdict and the serving decision stand without it."""
    from spark_apps.ops.overview import write_overview

    try:
        return write_overview(spark, settings, target)
    except Exception as exc:  # noqa: BLE001 - the page is a view of what is recorded, never part of the verdict
        log.error("the overview of %s was not written: %s", target.pipeline.name, first_line(exc))
        return None
