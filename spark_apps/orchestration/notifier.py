"""Airflow's side of alerting: a failed task becomes a kappa alert, sent and recorded like any other, and its
incident closes when the task next succeeds; a missed deadline closes when a run of the DAG succeeds.

The only module of the apps that imports Airflow. DAG files use it in their default arguments
(``on_failure_callback=KappaAlertNotifier()``), so it imports neither Spark nor Kafka: parsing a DAG stays
cheap, and the callback records its alert in the outbox instead of starting a JVM.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from airflow.sdk import BaseNotifier

from spark_apps.alerts.alert import Alert, runbook
from spark_apps.alerts.dispatch import dispatch, resolve
from spark_apps.core.settings import Settings


def task_key(dag_id: str, task_id: str) -> str:
    """The incident of a task that finally failed: open until the task succeeds (every map index shares it)."""
    return f"airflow:{dag_id}:{task_id}"


def deadline_key(dag_id: str) -> str:
    """The incident of a DAG run that missed its deadline: open until a run of the DAG succeeds."""
    return f"deadline:{dag_id}"


def task_failure_alert(context: Mapping[str, Any]) -> Alert:
    """The alert for the failed task of an Airflow callback context: one incident per task, however many runs fail."""
    ti = context["ti"]
    dag_id, task_id = ti.dag_id, ti.task_id
    run_id = context.get("run_id") or ti.run_id
    map_index = getattr(ti, "map_index", -1)
    task = task_id if map_index in (None, -1) else f"{task_id}[{map_index}]"
    exception = context.get("exception")
    error = (f"{type(exception).__name__}: {exception}" if isinstance(exception, BaseException)
             else str(exception or "no exception recorded"))
    logical_date = context.get("logical_date")
    return Alert(
        severity="critical",
        summary=f"Airflow task {dag_id}.{task} failed (run {run_id}, try {ti.try_number}): {error}",
        source="airflow",
        dedup_key=task_key(dag_id, task_id),
        details={"dag_id": dag_id, "task_id": task_id, "map_index": map_index, "run_id": run_id,
                 "logical_date": logical_date.isoformat() if logical_date else None,
                 "try_number": ti.try_number, "exception": error},
        runbook=runbook("task-failed"))


def deadline_alert(context: Mapping[str, Any]) -> Alert:
    """The alert for a DAG run that missed its deadline, from the simple context Airflow's scheduler hands the
    callback (``dag_run`` as the REST API shows it, and ``deadline``): one incident per DAG."""
    run = context.get("dag_run") or {}
    dag_id, run_id = run.get("dag_id", "unknown"), run.get("dag_run_id") or run.get("run_id")
    deadline = (context.get("deadline") or {}).get("deadline_time")
    return Alert(
        severity="critical",
        summary=f"Airflow run {dag_id} {run_id} has not finished by its deadline {deadline} (queued "
                f"{run.get('queued_at')}, {run.get('state')}): the audit is late, so serving decisions wait",
        source="airflow",
        dedup_key=deadline_key(dag_id),
        details={"dag_id": dag_id, "run_id": run_id, "queued_at": run.get("queued_at"),
                 "deadline_time": str(deadline), "state": run.get("state")},
        runbook=runbook("audit-late"))


async def deadline_missed(context: Mapping[str, Any] | None = None, **_: Any) -> str:
    """Airflow's triggerer awaits this when a run misses its deadline: page on-call like any alert. The sinks are
    blocking HTTP calls, so they run in a thread, off the triggerer's event loop."""
    alert = deadline_alert(context or {})
    await asyncio.to_thread(dispatch, Settings.from_env(), alert)
    return alert.summary


class KappaAlertNotifier(BaseNotifier):
    """Sends a failed task to on-call's sinks and the alerts outbox (recorded in audit.alerts by the next
    Spark command); settings come from the ``KAPPA_*`` environment of the process running the callback."""

    def notify(self, context: Mapping[str, Any]) -> None:
        dispatch(Settings.from_env(), task_failure_alert(context))


class KappaResolveNotifier(BaseNotifier):
    """A task's success closes its task-failed incident, if one is open (no JVM, no request otherwise)."""

    def notify(self, context: Mapping[str, Any]) -> None:
        ti = context["ti"]
        resolve(Settings.from_env(), task_key(ti.dag_id, ti.task_id), "airflow",
                f"Airflow task {ti.dag_id}.{ti.task_id} succeeded (run {context.get('run_id') or ti.run_id})")


class KappaRunResolveNotifier(BaseNotifier):
    """A DAG run's success closes the DAG's missed-deadline incident, if one is open: the late audit has finished."""

    def notify(self, context: Mapping[str, Any]) -> None:
        dag_id = context["dag"].dag_id
        resolve(Settings.from_env(), deadline_key(dag_id), "airflow",
                f"Airflow run {dag_id} {context.get('run_id')} finished")
