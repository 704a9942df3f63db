"""Fixtures shared by the integration tests: the crashed-and-restarted stream run, its audit, a webhook."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from spark_apps.audit.auditor import audit
from spark_apps.audit.verdict import AuditRun
from spark_apps.io.topics import admin_client
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.stream.job import StreamFailed
from spark_apps.target.resolution import target_of
from tests.support.streams import FAULTS, StreamRun, fresh_stream_settings, produce_hard_cases, run_stream
from tests.support.webhook import WebhookReceiver


@pytest.fixture(autouse=True)
def catalog(catalog_database):
    """Every integration test may start a Spark process (a `kappa` command, an Airflow task), which registers its
    tables in the session's catalog database."""
    return catalog_database


@pytest.fixture(scope="session")
def restarted_stream(kafka_broker, spark, settings, tmp_path_factory) -> Iterator[StreamRun]:
    """Every hard case, streamed in several micro-batches by a job killed at each stage and restarted."""
    stream_settings = fresh_stream_settings(settings, tmp_path_factory.mktemp("stream"), "test.stream.shared", 1100)
    manifest, values = produce_hard_cases(stream_settings, seed=4)
    failures = []
    for stage, batch_id in FAULTS:
        with pytest.raises(StreamFailed) as failed:
            run_stream(spark, stream_settings, fault=f"{stage}@{batch_id}")
        failures.append((stage, batch_id, failed.value.detail))
    job = run_stream(spark, stream_settings)
    yield StreamRun(job, manifest, values, failures)
    with admin_client(settings) as admin:
        admin.delete_topics([stream_settings.events_topic])


@pytest.fixture(scope="module")
def sql_endpoint(spark, settings):
    """The SQL endpoint (Spark's Thrift Server) on the session's catalog, for tests that read through a SQL client;
    stopped after their module, so its JVM (about 1.5 GB) is not held through the rest of the worker's session."""
    from spark_apps.io.spark_session import sql_endpoint_conf
    from spark_apps.services.sql_endpoint import SqlEndpoint

    endpoint = SqlEndpoint(settings, stop_with_parent=True)
    endpoint.start(sql_endpoint_conf(settings))
    yield endpoint
    endpoint.stop()


@pytest.fixture(scope="session")
def audited(spark, restarted_stream) -> AuditRun:
    """The restarted stream audited while the producer has already written past its last batch."""
    stream_settings = restarted_stream.job.settings
    produce_hard_cases(stream_settings, total=120, seed=77)
    return audit(spark, stream_settings, target_of(stream_settings, PIPELINE))


@pytest.fixture(scope="module")
def webhook():
    """A local HTTP receiver standing in for on-call's webhook, one per test module."""
    with WebhookReceiver() as receiver:
        yield receiver

