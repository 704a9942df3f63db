"""
### dbt models of one pipeline over its reconciled serving tables: `kappa_<pipeline>_dbt`

A pipeline has this DAG when the dbt project declares sources over its serving views (a source in schema
`serving` names its pipeline with `config.meta.kappa_pipeline`). The DAG builds what is downstream of those
sources (`--select source:<name>+`), and nothing of another pipeline's.

Scheduled on the Asset events `kappa_<pipeline>_reconcile` publishes, one per served gold table
(`serving.<table>`): it runs once every table the pipeline's models read has been reconciled again. It also
runs on `KAPPA_DBT_SCHEDULE` (hourly): once every table serves from the stream the batch audits only every
`KAPPA_KAPPA_AUDIT_EVERY_S`, and the marts must not go stale with it.
The `dbt` task runs one child `kappa dbt freshness build docs` process on the platform's own Spark session (one
JVM for the three steps), one step after the other:

1. `dbt source freshness` on the serving views (a stale source pages as a warning);
2. `dbt build`: the staging views, the Delta marts, their data tests and unit tests;
3. `dbt docs generate --static` (a single HTML file under `var/dbt/target/<pipeline>`).

A failed or refused step does not stop the next. `verdict` then fails the run when a step failed or was refused,
without a second page.

dbt refuses to start while a gold table was never reconciled, or while its view still reads the
stream table although its latest reconciliation failed; after a failure the views read the batch
snapshot, and every mart says which copy it was built from (`served_from`). A failed test pages
on-call (runbook: `docs/runbook.md#dbt-failed`); the marts downstream of it keep their last good build.
"""

from __future__ import annotations

from airflow.sdk import AssetAll, AssetOrTimeSchedule, CronTriggerTimetable, dag, task

from spark_apps.core.settings import Settings
from spark_apps.orchestration.pipelines import OrchestratedPipeline, orchestrated_pipelines
from spark_apps.orchestration.tasks import DbtSources, dag_arguments, dbt_sources, serving_asset

SETTINGS = Settings.from_env()
# In this order, in one process: a stale source only warns, and the docs describe what the build left.
STEPS = ("freshness", "build", "docs")


def dbt_dag(pipeline: OrchestratedPipeline, sources: DbtSources):
    assets = [serving_asset(pipeline.name, view) for view in sources.views]
    scope = ("--pipeline", pipeline.spec, "--select", sources.selector)

    @dag(
        dag_id=pipeline.dag_id("dbt"),
        schedule=AssetOrTimeSchedule(timetable=CronTriggerTimetable(SETTINGS.dbt_schedule, timezone="UTC"),
                                     assets=AssetAll(*assets)),
        tags=["kappa", "dbt", "marts", f"pipeline:{pipeline.name}"],
        doc_md=__doc__,
        **dag_arguments(SETTINGS),
    )
    def kappa_dbt():
        @task
        def dbt() -> dict:
            """Source freshness, then build (models, data tests, unit tests), then the docs site, in one `kappa dbt`
            process; every step's outcome, even a failed or refused one, goes to the verdict."""
            from spark_apps.orchestration.tasks import run_kappa

            return run_kappa("dbt", *STEPS, *scope, expect_failure_exit=True)

        @task(retries=0, on_failure_callback=[])
        def verdict(outcome: dict) -> str:
            """Fail the run when a dbt step failed or refused (on-call was paged by the dbt step itself)."""
            from airflow.sdk.exceptions import AirflowFailException

            steps = outcome["steps"]
            problems = [f"{o['command']}: {o.get('refused') or o.get('error') or ''} "
                        + ", ".join(f"{f['node']} {f['status']}" for f in o.get("failed", []))
                        for o in steps if not o.get("success")]
            if problems:
                raise AirflowFailException("dbt failed: " + "; ".join(p.strip() for p in problems))
            built = next(o for o in steps if o["command"].startswith("build"))
            served = ", ".join(f"{view} <- {source}" for view, source in built.get("served", {}).items())
            return f"dbt build ok over {served}; {built['counts']}"

        verdict(dbt())

    return kappa_dbt()


_DECLARED = dbt_sources(SETTINGS)
for _pipeline in orchestrated_pipelines(SETTINGS):
    if _pipeline.name in _DECLARED:
        dbt_dag(_pipeline, _DECLARED[_pipeline.name])
