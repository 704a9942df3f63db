"""
### dbt models over the reconciled serving tables (on every reconciliation, and on its own schedule)

Scheduled on the Asset events `kappa_reconcile` publishes, one per served gold table
(`serving.<table>`): it runs once every table the dbt project reads has been reconciled again. It also
runs on `KAPPA_DBT_SCHEDULE` (hourly): once every table serves from the stream the batch audits only every
`KAPPA_KAPPA_AUDIT_EVERY_S`, and the marts must not go stale with it.
Each step is a child `kappa dbt ...` process on the platform's own Spark session:

1. `freshness`: `dbt source freshness` on the serving views (a stale source pages as a warning);
2. `build`: `dbt build`, the staging views, the Delta marts, their data tests and unit tests;
3. `docs`: `dbt docs generate --static` (a single HTML file under `var/dbt/target`);
4. `verdict`: fails the run when a step failed or was refused, without a second page.

dbt refuses to start while a gold table was never reconciled, or while its view still reads the
stream table although its latest reconciliation failed; after a failure the views read the batch
snapshot, and every mart says which copy it was built from (`served_from`). A failed test pages
on-call (runbook: `docs/runbook.md#dbt-failed`); the marts downstream of it keep their last good build.
"""

from __future__ import annotations

from airflow.sdk import AssetAll, AssetOrTimeSchedule, CronTriggerTimetable, dag, task

from spark_apps.core.settings import Settings
from spark_apps.orchestration.tasks import dag_arguments, dbt_source_views, serving_asset

SETTINGS = Settings.from_env()
SOURCES = [serving_asset(SETTINGS.pipeline, view) for view in dbt_source_views(SETTINGS)]


@dag(
    dag_id="kappa_dbt",
    schedule=AssetOrTimeSchedule(timetable=CronTriggerTimetable(SETTINGS.dbt_schedule, timezone="UTC"),
                                 assets=AssetAll(*SOURCES)),
    tags=["kappa", "dbt", "marts"],
    doc_md=__doc__,
    **dag_arguments(SETTINGS),
)
def kappa_dbt():
    @task
    def freshness() -> dict:
        """dbt source freshness of the serving views (the outcome, even a failed one, goes to the verdict)."""
        from spark_apps.orchestration.tasks import run_kappa

        return run_kappa("dbt", "freshness", expect_failure_exit=True)

    @task
    def build(fresh: dict) -> dict:
        """dbt build: models, data tests and unit tests over the reconciled serving views."""
        from spark_apps.orchestration.tasks import run_kappa

        return run_kappa("dbt", "build", expect_failure_exit=True)

    @task
    def docs(built: dict) -> dict:
        """The dbt docs site, regenerated after every build."""
        from spark_apps.orchestration.tasks import run_kappa

        return run_kappa("dbt", "docs", expect_failure_exit=True)

    @task(retries=0, on_failure_callback=[])
    def verdict(fresh: dict, built: dict, documented: dict) -> str:
        """Fail the run when dbt failed or refused (on-call was paged by the dbt step itself)."""
        from airflow.sdk.exceptions import AirflowFailException

        problems = [f"{o['command']}: {o.get('refused') or o.get('error') or ''} "
                    + ", ".join(f"{f['node']} {f['status']}" for f in o.get("failed", []))
                    for o in (fresh, built, documented) if not o.get("success")]
        if problems:
            raise AirflowFailException("dbt failed: " + "; ".join(p.strip() for p in problems))
        served = ", ".join(f"{view} <- {source}" for view, source in built.get("served", {}).items())
        return f"dbt build ok over {served}; {built['counts']}"

    fresh = freshness()
    built = build(fresh)
    verdict(fresh, built, docs(built))


kappa_dbt()
