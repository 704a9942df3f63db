"""
### Kappa replay (manual)

Rebuilds the stream tables of a pipeline from offset 0 of the log, the Kappa way of deploying a
logic change or repairing a table. Trigger it with `confirm` set to true:

1. every gold table falls back to its batch snapshot (readers keep a consistent copy, and the
   stream must earn `kappa` again from reconciliations after this point);
2. the supervised stream stops; `kappa stream --reset --yes` deletes the checkpoint and the stream
   tables and reprocesses the whole log until caught up;
3. a reconciliation proves the rebuilt tables and feeds the serving state machine;
4. the supervised stream starts again.

Needs the whole log: the maintenance DAG's log-retention check says whether it is still there.
"""

from __future__ import annotations

from airflow.sdk import Param, dag, task

from spark_apps.orchestration import dag_arguments
from spark_apps.settings import Settings

SETTINGS = Settings.from_env()


@dag(
    dag_id="kappa_replay",
    schedule=None,
    tags=["kappa", "replay", "manual"],
    doc_md=__doc__,
    **dag_arguments(SETTINGS),
    params={
        "pipeline": Param(SETTINGS.pipeline, type="string", description="pipeline to rebuild"),
        "confirm": Param(False, type="boolean", description="rebuilding deletes the stream tables; confirm"),
        "reason": Param("kappa replay", type="string", description="recorded with the serving fallback"),
    },
)
def kappa_replay():
    @task(retries=0)
    def fall_back(*, params) -> dict:
        """Refuse without confirmation; then serve every gold table from its batch snapshot."""
        from airflow.sdk.exceptions import AirflowFailException

        from spark_apps.orchestration import run_kappa

        if not params["confirm"]:
            raise AirflowFailException("the replay deletes and rebuilds the stream tables; trigger with confirm=true")
        return run_kappa("serving", "fallback", "--pipeline", params["pipeline"], "--reason", params["reason"])

    @task
    def stop_stream(*, params) -> bool:
        from spark_apps.settings import Settings
        from spark_apps.supervisor import stop_stream as stop

        return stop(Settings.from_env(pipeline=params["pipeline"]), timeout_s=120)

    @task(retries=0)
    def rebuild(*, params) -> None:
        """Delete the checkpoint and stream tables, then reprocess the whole log (a child process)."""
        from spark_apps.orchestration import run_kappa_plain

        run_kappa_plain("stream", "--pipeline", params["pipeline"], "--reset", "--yes")

    @task
    def reconcile(*, params, dag_run) -> dict:
        """Prove the rebuilt tables; the verdict feeds the serving state machine."""
        from spark_apps.orchestration import audit_run_id, run_kappa

        return run_kappa("reconcile", "--pipeline", params["pipeline"], "--run-id",
                         audit_run_id("kappa_replay", dag_run), expect_failure_exit=True)

    @task
    def restart_stream(outcome: dict, *, params) -> str:
        from spark_apps.settings import Settings
        from spark_apps.supervisor import supervise

        health = supervise(Settings.from_env(pipeline=params["pipeline"]), start=True)
        verdict = "exact" if outcome["success"] else "NOT exact (serving stays on the batch snapshot)"
        return f"replay reconciled {verdict}; stream {health.status}"

    outcome = reconcile()
    fall_back() >> stop_stream() >> rebuild() >> outcome
    restart_stream(outcome)


kappa_replay()
