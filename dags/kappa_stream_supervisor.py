"""
### Stream supervision of one pipeline (every few minutes): `kappa_<pipeline>_stream_supervisor`

Keeps the Kappa stream running and honest: starts `kappa stream --continuous` as its own process
when it is not running, reads its heartbeat, and measures consumer lag as the log end offsets minus
the offsets the stream has committed. It alerts on-call when the job is down, stalled (heartbeat
older than `KAPPA_STREAM_STALL_S`) or lagging (more than `KAPPA_MAX_LAG_RECORDS` records behind).
Runbooks: `docs/runbook.md#stream-down`, `#stream-stalled`, `#stream-lagging`.

The check runs in the task itself (it needs no Spark: a pid file, a heartbeat file and the broker's
offsets); the stream it starts is a separate process that outlives the task.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import dag, task

from spark_apps.core.settings import Settings
from spark_apps.orchestration.pipelines import OrchestratedPipeline, orchestrated_pipelines
from spark_apps.orchestration.tasks import dag_arguments

SETTINGS = Settings.from_env()


def supervisor_dag(pipeline: OrchestratedPipeline):
    @dag(
        dag_id=pipeline.dag_id("stream_supervisor"),
        schedule=dt.timedelta(minutes=SETTINGS.supervise_every_min),
        tags=["kappa", "stream", "supervision", f"pipeline:{pipeline.name}"],
        doc_md=__doc__,
        **dag_arguments(SETTINGS),
    )
    def kappa_stream_supervisor():
        # A check that takes longer than its interval is hung: it fails (and the next run pages) instead of piling up.
        @task(retries=0, on_failure_callback=[],
              execution_timeout=dt.timedelta(minutes=SETTINGS.supervise_every_min))
        def supervise() -> dict:
            """Start the stream if it is down; fail (after alerting, once per incident) when it is unhealthy."""
            from dataclasses import asdict

            from airflow.sdk.exceptions import AirflowFailException

            from spark_apps.core.settings import Settings
            from spark_apps.ops.supervisor import supervise as check
            from spark_apps.target.resolution import declared

            settings = Settings.from_env()
            health = check(settings, declared(settings, pipeline.spec), start=True)
            if not health.healthy:
                raise AirflowFailException(f"stream {health.status}: {health.detail}")
            return asdict(health)

        supervise()

    return kappa_stream_supervisor()


for _pipeline in orchestrated_pipelines(SETTINGS):
    supervisor_dag(_pipeline)
