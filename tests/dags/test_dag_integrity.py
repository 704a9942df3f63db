"""Every DAG of every registered pipeline parses cleanly, cheaply and safely, with tags, retries, docs and schedules
from settings. Two pipelines are registered: the marketplace (installed with the project) and the tests' sensor
pipeline, registered under the entry-point group by a distribution on PYTHONPATH, as a team's own package would."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from spark_apps.core.settings import PROJECT_ROOT, Settings
from spark_apps.services.airflow_env import airflow_environment
from tests.support.registration import register_sensor_pipeline

JOBS = ("reconcile", "stream_supervisor", "maintenance", "compaction", "replay")
# The sensor pipeline brings no dbt models, so it has no dbt DAG.
DAGS = {*(f"kappa_{pipeline}_{job}" for pipeline in ("marketplace", "sensors") for job in JOBS),
        "kappa_marketplace_dbt"}


@pytest.fixture(scope="module")
def parsed(tmp_path_factory) -> dict:
    """The DAG folder parsed by Airflow's DagBag in a fresh interpreter, with schedules overridden by env."""
    home = tmp_path_factory.mktemp("dag-parse")
    settings = Settings(home=home)
    env = {**airflow_environment(settings), "KAPPA_HOME": str(home), "KAPPA_RECONCILE_SCHEDULE": "@daily",
           "PYTHONPATH": register_sensor_pipeline(home / "site"),
           "KAPPA_SUPERVISE_EVERY_MIN": "7", "KAPPA_TASK_RETRIES": "4", "KAPPA_TASK_TIMEOUT_S": "5400",
           "KAPPA_DBT_SCHEDULE": "15 */2 * * *", "KAPPA_RECONCILE_DEADLINE_S": "900",
           "KAPPA_COMPACTION_SCHEDULE": "*/5 * * * *"}
    done = subprocess.run([sys.executable, str(PROJECT_ROOT / "tests" / "support" / "airflow_probe.py"), "parse",
                           str(PROJECT_ROOT / "dags")], env=env, capture_output=True, text=True, cwd=PROJECT_ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_dag_imports_without_errors(parsed):
    assert parsed["import_errors"] == {}
    assert set(parsed["dags"]) == DAGS


def test_parsing_starts_no_spark_and_touches_no_kafka(parsed):
    assert parsed["heavy_modules"] == []
    assert parsed["connections"] == []


def job_of(dag_id: str) -> str:
    """``kappa_<pipeline>_<job>`` -> ``<job>``."""
    return next(job for job in (*JOBS, "dbt") if dag_id.endswith(f"_{job}"))


def test_every_dag_has_tags_docs_and_an_acyclic_graph(parsed):
    for dag_id, dag in parsed["dags"].items():
        assert "kappa" in dag["tags"] and len(dag["tags"]) >= 3, dag_id
        assert dag["doc_md"], dag_id
        assert sorted(dag["topological"]) == sorted(dag["tasks"]), dag_id


def test_each_pipelines_dags_carry_its_name_and_run_its_own_code(parsed):
    for pipeline in ("marketplace", "sensors"):
        ids = {dag_id for dag_id in parsed["dags"] if dag_id.startswith(f"kappa_{pipeline}_")}
        assert ids and all(f"pipeline:{pipeline}" in parsed["dags"][dag_id]["tags"] for dag_id in ids), ids
        assert parsed["dags"][f"kappa_{pipeline}_replay"]["params"]["pipeline"] == pipeline


def test_tasks_retry_and_page_on_call_unless_they_alert_themselves(parsed):
    self_alerting = {("reconcile", "verdict"), ("stream_supervisor", "supervise"), ("dbt", "verdict"),
                     ("replay", "gate")}
    for dag_id, dag in parsed["dags"].items():
        for task_id, task in dag["tasks"].items():
            if (job_of(dag_id), task_id) in self_alerting:
                assert task["failure_callbacks"] == 0, (dag_id, task_id)
                continue
            assert task["failure_callbacks"] == 1, (dag_id, task_id)
            if (job_of(dag_id), task_id) != ("replay", "confirm"):
                assert task["retries"] == 4, (dag_id, task_id)


def test_every_task_has_a_time_limit_from_settings(parsed):
    for dag_id, dag in parsed["dags"].items():
        for task_id, task in dag["tasks"].items():
            expected = 7 * 60 if job_of(dag_id) == "stream_supervisor" else 5400
            assert task["timeout_s"] == expected, (dag_id, task_id)


def test_the_dbt_dag_runs_when_reconciliation_publishes_every_table_it_reads(parsed):
    dbt = parsed["dags"]["kappa_marketplace_dbt"]
    for view in ("serving.merchant_revenue", "serving.order_status", "serving.customer_sessions"):
        assert f"kappa://marketplace/{view}" in dbt["schedule"]
    assert dbt["topological"] == ["dbt", "verdict"]


def test_the_dbt_dag_also_refreshes_the_marts_on_its_own_schedule_while_audits_are_skipped(parsed):
    schedule = parsed["dags"]["kappa_marketplace_dbt"]["schedule"]
    assert schedule.startswith("Asset or 15 */2 * * *") and schedule.count("kappa://marketplace/serving.") == 3
    assert "AssetAll(" in schedule, "the asset trigger still waits for every table it reads"


def test_the_replay_dag_reconciles_and_swaps_in_one_task_and_restarts_the_stream_behind_the_gate(parsed):
    for pipeline in ("marketplace", "sensors"):
        assert parsed["dags"][f"kappa_{pipeline}_replay"]["topological"] == [
            "confirm", "build_generation", "reconcile_generation", "gate", "restart_stream"]


def test_the_reconcile_dag_audits_and_serves_in_one_task_then_publishes_and_gives_its_verdict(parsed):
    for pipeline in ("marketplace", "sensors"):
        assert parsed["dags"][f"kappa_{pipeline}_reconcile"]["topological"] == ["reconcile", "publish", "verdict"]


def test_schedules_come_from_settings(parsed):
    for pipeline in ("marketplace", "sensors"):
        dags = {job_of(dag_id): dag for dag_id, dag in parsed["dags"].items() if f"pipeline:{pipeline}" in dag["tags"]}
        assert dags["reconcile"]["schedule"] == "@daily"
        assert "0:07:00" in dags["stream_supervisor"]["schedule"]
        assert dags["replay"]["schedule"] == "None"
        assert dags["compaction"]["schedule"] == "*/5 * * * *"


def test_a_reconcile_run_not_finished_by_its_deadline_pages_through_the_triggerer(parsed):
    for pipeline in ("marketplace", "sensors"):
        assert parsed["dags"][f"kappa_{pipeline}_reconcile"]["deadlines"] == [
            {"reference": "DagRunQueuedAtDeadline", "interval_s": 900.0,
             "callback": "spark_apps.orchestration.notifier.deadline_missed"}]
