"""
### Kappa replay of one pipeline, blue/green (manual): `kappa_<pipeline>_replay`

How a logic change is deployed the Kappa way: rebuild every stream table from offset 0 of the log
into a new generation (`gold.<table>__g<n>`, its own checkpoint) while the current generation keeps
streaming and serving, prove it, then swap. Trigger it with `confirm` set to true and `pipeline` set
to the code to deploy (an entry point name or `module:attribute`):

1. `build_generation`: `kappa replay build` streams the new generation until caught up with the log
   (code that declares another pipeline than this DAG's is refused first);
2. `reconcile_generation`: `kappa replay reconcile --swap` recomputes the batch with the same new code and
   compares every table exactly (a failure alerts, runbook `replay-failed`, and serving is untouched). When it is
   exact, the same process makes the new generation active and moves every serving view to it in one commit
   (each table keeps its mode: the stream table for `kappa`, the batch snapshot for `lambda`). A retry finds the
   run in the ledger, and a swap that already happened is not done again;
3. `gate`: ends the run failed if the reconciliation was not exact;
4. `restart_stream`: a supervised stream running the old generation is restarted on the new one.

The old generation's tables and checkpoint are kept: `kappa replay rollback --reason ...` serves them
again. Needs the whole log: the maintenance DAG's log-retention check says whether it is still there.
"""

from __future__ import annotations

from airflow.sdk import Param, dag, task

from spark_apps.core.settings import Settings
from spark_apps.orchestration.pipelines import OrchestratedPipeline, orchestrated_pipelines
from spark_apps.orchestration.tasks import dag_arguments

SETTINGS = Settings.from_env()


def replay_dag(pipeline: OrchestratedPipeline):
    dag_id = pipeline.dag_id("replay")

    @dag(
        dag_id=dag_id,
        schedule=None,
        tags=["kappa", "replay", "manual", f"pipeline:{pipeline.name}"],
        doc_md=__doc__,
        **dag_arguments(SETTINGS),
        params={
            "pipeline": Param(pipeline.spec, type="string", description="the pipeline code to deploy"),
            "confirm": Param(False, type="boolean", description="a replay streams the whole log again; confirm"),
            "reason": Param("kappa replay", type="string", description="recorded with the generation and the swap"),
        },
    )
    def kappa_replay():
        @task(retries=0)
        def confirm(*, params) -> str:
            """A run without confirm=true is a deliberate no: it skips the replay and pages nobody."""
            from airflow.sdk.exceptions import AirflowSkipException

            if not params["confirm"]:
                raise AirflowSkipException("a replay rebuilds every stream table from the whole log; trigger with "
                                           "confirm=true")
            return params["pipeline"]

        @task
        def build_generation(code: str, *, params) -> dict:
            """Stream a new generation from offset 0 (a retry resumes the interrupted build from its checkpoint);
            code that declares another pipeline than this DAG's is refused before anything is built."""
            from spark_apps.orchestration.tasks import run_kappa

            return run_kappa("replay", "build", "--pipeline", code, "--replay-of", pipeline.spec,
                             "--reason", params["reason"])

        @task
        def reconcile_generation(built: dict, *, params, dag_run) -> dict:
            """Prove the new generation and swap serving to it when exact, in one process; a rerun finds its
            reconciliation in the ledger by run id, and its swap done."""
            from spark_apps.orchestration.tasks import audit_run_id, run_kappa

            return run_kappa("replay", "reconcile", "--pipeline", params["pipeline"], "--generation",
                             built["generation"], "--run-id", audit_run_id(dag_id, dag_run), "--swap",
                             "--reason", params["reason"], expect_failure_exit=True)

        @task(retries=0, on_failure_callback=[])
        def gate(outcome: dict) -> str:
            """Fail the run when the new generation differs from the batch (the reconcile step already alerted and
            did not swap)."""
            from airflow.sdk.exceptions import AirflowFailException

            if not outcome["success"]:
                failed = [t["table"] for t in outcome["tables"] if not t["success"]]
                raise AirflowFailException(f"generation {outcome['generation']} is not served: reconciliation "
                                           f"{outcome['run_id']} failed for {', '.join(failed)}; serving is unchanged; "
                                           f"report {outcome['report']}")
            return outcome["generation"]

        @task
        def restart_stream(generation: str) -> str:
            """This pipeline's supervised stream keeps the active generation: one still running the old restarts."""
            from spark_apps.core.settings import Settings
            from spark_apps.ops.supervisor import start_stream, stop_stream
            from spark_apps.target.resolution import declared

            settings = Settings.from_env()
            target = declared(settings, pipeline.spec)
            restarted = stop_stream(settings, target, timeout_s=120)
            if restarted:
                start_stream(settings, target)
            verdict = "restarted on it" if restarted else "not running under the supervisor; it starts on it when due"
            return f"generation {generation} serves; the stream {verdict}"

        restart_stream(gate(reconcile_generation(build_generation(confirm()))))

    return kappa_replay()


for _pipeline in orchestrated_pipelines(SETTINGS):
    replay_dag(_pipeline)
