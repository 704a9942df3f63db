"""
### Batch recompute and reconciliation of one pipeline (hourly): `kappa_<pipeline>_reconcile`

Proves the stream: align on the last stream batch committed by the end of the data interval
(its log offsets `O` and each table's version `V`), recompute every table from Kafka `[start, O)`
into the `batch.*` snapshots (or, between the daily full runs of `KAPPA_FULL_AUDIT_EVERY_S`, extend
the last verified snapshots by the records since and compare the keys they touch: an incremental
run), diff each stream table against its snapshot, run the Great
Expectations suites, append the verdict to `audit.reconciliation_ledger`, then let the serving
state machine move each gold table between the batch snapshot (`lambda`) and the stream table
(`kappa`), and publish one Asset event per served table for the models downstream. Each run rewrites the
pipeline's overview page, its history at a glance (`var/reports/overview/<pipeline>.html`, or `kappa report`).

While every gold table serves the stream, the batch only audits, every `KAPPA_KAPPA_AUDIT_EVERY_S`
seconds; the runs in between skip. A mismatch switches the table back to the batch snapshot at
once and pages on-call (runbook: `docs/runbook.md#reconciliation-mismatch`); the run then ends
failed so the grid shows it. A run not finished `KAPPA_RECONCILE_DEADLINE_S` after it was queued
pages on-call (a Deadline Alert; runbook: `docs/runbook.md#audit-late`) and goes on. Rerunning a
run is safe: its reconciliation is found in the ledger by run id and not recomputed, and its
serving decision is not taken twice.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import AssetAlias, AsyncCallback, DeadlineAlert, DeadlineReference, dag, task

from spark_apps.core.settings import Settings
from spark_apps.orchestration.pipelines import OrchestratedPipeline, orchestrated_pipelines
from spark_apps.orchestration.tasks import dag_arguments, serving_asset

SETTINGS = Settings.from_env()


def reconcile_dag(pipeline: OrchestratedPipeline):
    dag_id = pipeline.dag_id("reconcile")
    reconciled = AssetAlias(f"kappa.{pipeline.name}.reconciled")

    @dag(
        dag_id=dag_id,
        schedule=SETTINGS.reconcile_schedule,
        tags=["kappa", "reconciliation", "serving", f"pipeline:{pipeline.name}"],
        doc_md=__doc__,
        deadline=DeadlineAlert(reference=DeadlineReference.DAGRUN_QUEUED_AT,
                               interval=timedelta(seconds=SETTINGS.reconcile_deadline_s),
                               callback=AsyncCallback("spark_apps.orchestration.notifier.deadline_missed"))
        if SETTINGS.reconcile_deadline_s else None,
        **dag_arguments(SETTINGS),
    )
    def kappa_reconcile():
        @task
        def reconcile(*, dag_run) -> dict:
            """Recompute, reconcile and apply the verdict to serving, in one child `kappa reconcile` process (one
            Spark driver, not two); skips when the audit is not due. A retry finds the verdict in the ledger by run
            id, so it applies it without recomputing, and never twice."""
            from airflow.sdk.exceptions import AirflowSkipException

            from spark_apps.orchestration.tasks import as_of, audit_run_id, run_kappa

            outcome = run_kappa("reconcile", "--pipeline", pipeline.spec, "--run-id", audit_run_id(dag_id, dag_run),
                                "--as-of", as_of(dag_run).isoformat(), "--if-due", "--kind", "auto",
                                expect_failure_exit=True)
            if outcome.get("skipped"):
                raise AirflowSkipException(outcome["reason"])
            return outcome

        @task(outlets=[reconciled])
        def publish(outcome: dict, *, outlet_events) -> list[str]:
            """One Asset event per served gold table, saying which copy it serves and on what evidence."""
            published = []
            for decision in outcome["decisions"]:
                asset = serving_asset(pipeline.name, decision["view"])
                outlet_events[reconciled].add(asset, extra={
                    "run_id": outcome["run_id"], "mode": decision["mode"], "source_table": decision["source_table"],
                    "source_version": decision["source_version"], "changed": decision["changed"]})
                published.append(decision["view"])
            return published

        @task(retries=0, on_failure_callback=[])
        def verdict(outcome: dict, published: list[str]) -> str:
            """Fail the run on a mismatch (serving already fell back and paged on-call) so the grid shows it."""
            from airflow.sdk.exceptions import AirflowFailException

            failed = [t["table"] for t in outcome["tables"] if not t["success"]]
            if failed:
                raise AirflowFailException(f"reconciliation {outcome['run_id']} failed for {', '.join(failed)}; "
                                           f"serving fell back to the batch snapshot; report {outcome['report']}")
            return f"reconciliation {outcome['run_id']} exact; published {', '.join(published)}"

        outcome = reconcile()
        verdict(outcome, publish(outcome))

    return kappa_reconcile()


for _pipeline in orchestrated_pipelines(SETTINGS):
    reconcile_dag(_pipeline)
