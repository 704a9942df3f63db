"""Airflow task failures become kappa alerts: the alert's content, and the notifier that sends it."""

from __future__ import annotations

import asyncio
import datetime as dt
import importlib
import json
import logging
import subprocess
import sys
from types import ModuleType, SimpleNamespace

import pytest

from spark_apps.core.settings import PROJECT_ROOT
from tests.support.webhook import WebhookReceiver


@pytest.fixture(scope="module")
def airflow_alerts(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The module, imported with a throwaway AIRFLOW_HOME; the root logging Airflow configures on import is
    put back, so later tests log as before."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW_HOME", str(tmp_path_factory.mktemp("airflow-home")))
        module = importlib.import_module("spark_apps.orchestration.notifier")
    root.handlers[:] = handlers
    root.setLevel(level)
    return module


def failure_context(map_index: int = -1) -> dict:
    ti = SimpleNamespace(dag_id="kappa_reconcile", task_id="reconcile", run_id="scheduled__2026-03-01T08:00:00+00:00",
                         try_number=3, map_index=map_index)
    return {"ti": ti, "run_id": ti.run_id, "logical_date": dt.datetime(2026, 3, 1, 8, tzinfo=dt.UTC),
            "exception": RuntimeError("kappa reconcile exited 1")}


def test_a_task_failure_is_one_critical_incident_per_task_linked_to_the_task_failed_runbook(airflow_alerts):
    alert = airflow_alerts.task_failure_alert(failure_context())
    assert (alert.severity, alert.source, alert.dedup_key, alert.runbook) == (
        "critical", "airflow", "airflow:kappa_reconcile:reconcile", "docs/runbook.md#task-failed")
    assert alert.summary == ("Airflow task kappa_reconcile.reconcile failed (run scheduled__2026-03-01T08:00:00+00:00, "
                             "try 3): RuntimeError: kappa reconcile exited 1")
    assert alert.details == {"dag_id": "kappa_reconcile", "task_id": "reconcile", "map_index": -1,
                             "run_id": "scheduled__2026-03-01T08:00:00+00:00",
                             "logical_date": "2026-03-01T08:00:00+00:00", "try_number": 3,
                             "exception": "RuntimeError: kappa reconcile exited 1"}


def test_a_mapped_task_names_its_index_but_shares_the_task_incident(airflow_alerts):
    alert = airflow_alerts.task_failure_alert({**failure_context(map_index=2), "exception": None,
                                               "logical_date": None})
    assert alert.summary.startswith("Airflow task kappa_reconcile.reconcile[2] failed")
    assert alert.summary.endswith("no exception recorded")
    assert alert.dedup_key == "airflow:kappa_reconcile:reconcile"
    assert alert.details["logical_date"] is None


def test_the_notifier_is_an_airflow_notifier_that_sends_the_failure_and_keeps_it_in_the_outbox(
        airflow_alerts, monkeypatch, tmp_path):
    from airflow.sdk import BaseNotifier

    notifier = airflow_alerts.KappaAlertNotifier()
    assert isinstance(notifier, BaseNotifier)
    with WebhookReceiver() as receiver:
        monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
        monkeypatch.setenv("KAPPA_ALERT_WEBHOOK_URL", f"{receiver.url}/hook")
        notifier(failure_context())  # as Airflow calls an on_failure_callback
    sent, = receiver.bodies("/hook")
    assert sent["dedup_key"] == "airflow:kappa_reconcile:reconcile" and sent["severity"] == "critical"
    kept, = [json.loads(line) for line in (tmp_path / "alerts" / "outbox.jsonl").read_text().splitlines()]
    assert kept["alert_id"] == sent["alert_id"]
    assert kept["deliveries"] == [{"sink": "webhook", "ok": True, "status": 200, "error": "", "attempts": 1}]


def deadline_context() -> dict:
    """What Airflow's scheduler hands a deadline callback: the run as its REST API shows it, and the deadline."""
    return {"dag_run": {"dag_id": "kappa_reconcile", "dag_run_id": "scheduled__2026-03-01T08:00:00+00:00",
                        "queued_at": "2026-03-01T08:00:02Z", "state": "running"},
            "deadline": {"id": "d-1", "deadline_time": "2026-03-01T09:00:02Z"}}


def test_a_missed_deadline_is_one_critical_incident_per_dag_linked_to_the_audit_late_runbook(airflow_alerts):
    alert = airflow_alerts.deadline_alert(deadline_context())
    assert (alert.severity, alert.dedup_key, alert.runbook) == (
        "critical", "deadline:kappa_reconcile", "docs/runbook.md#audit-late")
    assert alert.summary == ("Airflow run kappa_reconcile scheduled__2026-03-01T08:00:00+00:00 has not finished by "
                             "its deadline 2026-03-01T09:00:02Z (queued 2026-03-01T08:00:02Z, running): the audit "
                             "is late, so serving decisions wait")


def test_the_triggerer_callback_is_awaitable_and_sends_the_missed_deadline(airflow_alerts, monkeypatch, tmp_path):
    from airflow.sdk import AsyncCallback

    AsyncCallback.verify_callable(airflow_alerts.deadline_missed)
    with WebhookReceiver() as receiver:
        monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
        monkeypatch.setenv("KAPPA_ALERT_WEBHOOK_URL", f"{receiver.url}/hook")
        summary = asyncio.run(airflow_alerts.deadline_missed(context=deadline_context()))
    sent, = receiver.bodies("/hook")
    assert sent["dedup_key"] == "deadline:kappa_reconcile" and sent["summary"] == summary


def test_a_task_that_succeeds_after_failing_resolves_its_incident_once(airflow_alerts, monkeypatch, tmp_path):
    with WebhookReceiver() as receiver:
        monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
        monkeypatch.setenv("KAPPA_ALERT_WEBHOOK_URL", f"{receiver.url}/hook")
        airflow_alerts.KappaResolveNotifier()(failure_context())  # never failed: nothing to close
        airflow_alerts.KappaAlertNotifier()(failure_context())
        airflow_alerts.KappaResolveNotifier()(failure_context())  # as Airflow calls an on_success_callback
        airflow_alerts.KappaResolveNotifier()(failure_context())
    assert [(b["dedup_key"], b["action"]) for b in receiver.bodies("/hook")] == [
        ("airflow:kappa_reconcile:reconcile", "trigger"), ("airflow:kappa_reconcile:reconcile", "resolve")]
    assert receiver.bodies("/hook")[1]["summary"] == (
        "resolved: airflow:kappa_reconcile:reconcile: Airflow task kappa_reconcile.reconcile succeeded (run "
        "scheduled__2026-03-01T08:00:00+00:00)")


def test_a_run_that_finishes_after_its_deadline_resolves_the_missed_deadline(airflow_alerts, monkeypatch, tmp_path):
    """The DAG's on_success_callback, with the context Airflow's DAG processor hands it."""
    from airflow.sdk import DAG

    run_done = {"dag": DAG("kappa_reconcile", schedule=None), "run_id": "scheduled__2026-03-01T08:00:00+00:00",
                "reason": "success"}
    with WebhookReceiver() as receiver:
        monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
        monkeypatch.setenv("KAPPA_ALERT_WEBHOOK_URL", f"{receiver.url}/hook")
        asyncio.run(airflow_alerts.deadline_missed(context=deadline_context()))
        airflow_alerts.KappaRunResolveNotifier()(run_done)
        airflow_alerts.KappaRunResolveNotifier()(run_done)
    assert [(b["dedup_key"], b["action"], b["severity"]) for b in receiver.bodies("/hook")] == [
        ("deadline:kappa_reconcile", "trigger", "critical"), ("deadline:kappa_reconcile", "resolve", "info")]


def test_every_dag_pages_a_failed_task_and_closes_incidents_on_success(airflow_alerts):
    from spark_apps.core.settings import Settings
    from spark_apps.orchestration.tasks import dag_arguments

    arguments = dag_arguments(Settings())
    assert [type(n).__name__ for n in arguments["on_success_callback"]] == ["KappaRunResolveNotifier"]
    assert [type(n).__name__ for n in arguments["default_args"]["on_failure_callback"]] == ["KappaAlertNotifier"]
    assert [type(n).__name__ for n in arguments["default_args"]["on_success_callback"]] == ["KappaResolveNotifier"]


def test_importing_the_notifier_loads_neither_spark_nor_kafka(tmp_path):
    probe = ("import sys, spark_apps.orchestration.notifier; "
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'py4j', 'delta', 'kafka'}))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=PROJECT_ROOT,
                          env={"PATH": "/usr/bin:/bin", "AIRFLOW_HOME": str(tmp_path)}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
