"""
### Compaction of one pipeline's stream store (every 10 minutes): `kappa_<pipeline>_compaction`

The stream appends each micro-batch's rows and never rewrites them; every gold table is a view that folds the rows
appended since its base. This DAG folds the tail into the base (`kappa compact`): per gold table, the rows of every
whole epoch the stream has finished are replaced, in one commit, by one row per key. What every view returns stays
the same at every version, and the stream's appends never conflict with it. Schedule:
`KAPPA_COMPACTION_SCHEDULE`. The work runs as a child `kappa compact` process.
"""

from __future__ import annotations

from airflow.sdk import dag, task

from spark_apps.core.settings import Settings
from spark_apps.orchestration.pipelines import OrchestratedPipeline, orchestrated_pipelines
from spark_apps.orchestration.tasks import dag_arguments

SETTINGS = Settings.from_env()


def compaction_dag(pipeline: OrchestratedPipeline):
    @dag(
        dag_id=pipeline.dag_id("compaction"),
        schedule=SETTINGS.compaction_schedule,
        tags=["kappa", "compaction", "delta", f"pipeline:{pipeline.name}"],
        doc_md=__doc__,
        **dag_arguments(SETTINGS),
    )
    def kappa_compaction():
        @task
        def compact() -> None:
            """Fold the tail of every gold table of the active generation's store into its base."""
            from spark_apps.orchestration.tasks import run_kappa_plain

            run_kappa_plain("compact", "--pipeline", pipeline.spec)

        compact()

    return kappa_compaction()


for _pipeline in orchestrated_pipelines(SETTINGS):
    compaction_dag(_pipeline)
