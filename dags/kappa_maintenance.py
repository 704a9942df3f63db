"""
### Delta maintenance of one pipeline (daily): `kappa_<pipeline>_maintenance`

Compacts small files (`OPTIMIZE`) and removes files no version within the retention still needs
(`VACUUM`, never below `KAPPA_VACUUM_RETENTION_HOURS`, at least 7 days, so the auditor and a
rollback can still read old versions), then checks that the streaming checkpoint agrees with
`stream.commits` and that the log still holds every offset from the stream's start (a Kappa
replay needs the whole log). A failed check pages on-call: `docs/runbook.md#maintenance-failed`,
`docs/runbook.md#log-retention`. The work runs as a child `kappa maintain` process.
"""

from __future__ import annotations

from airflow.sdk import dag, task

from spark_apps.core.settings import Settings
from spark_apps.orchestration.pipelines import OrchestratedPipeline, orchestrated_pipelines
from spark_apps.orchestration.tasks import dag_arguments

SETTINGS = Settings.from_env()


def maintenance_dag(pipeline: OrchestratedPipeline):
    @dag(
        dag_id=pipeline.dag_id("maintenance"),
        schedule=SETTINGS.maintenance_schedule,
        tags=["kappa", "maintenance", "delta", f"pipeline:{pipeline.name}"],
        doc_md=__doc__,
        **dag_arguments(SETTINGS),
    )
    def kappa_maintenance():
        @task
        def maintain() -> None:
            """OPTIMIZE and VACUUM every table, then the checkpoint and log-retention checks."""
            from spark_apps.orchestration.tasks import run_kappa_plain

            run_kappa_plain("maintain", "--pipeline", pipeline.spec)

        maintain()

    return kappa_maintenance()


for _pipeline in orchestrated_pipelines(SETTINGS):
    maintenance_dag(_pipeline)
