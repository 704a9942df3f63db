"""The object store goes down under a running stream: the stream fails, an audit started meanwhile refuses in one
line and pages, and once the store is back the stream resumes from its checkpoint without loss or duplicate, the
audit is exact and the page resolves."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from spark_apps.alerts import incidents
from spark_apps.cli import main
from spark_apps.core.paths import heartbeat_path
from spark_apps.core.settings import PROJECT_ROOT
from spark_apps.core.waiting import wait_for
from spark_apps.io import delta_log, lineage
from spark_apps.io.catalog import table_path
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.ops.scheduled_audit import reconcile, storage_key
from spark_apps.stream.job import StreamJob
from spark_apps.target.resolution import resolve
from tests.support.object_store import stream_on_object_store
from tests.support.streams import produce_hard_cases

pytestmark = pytest.mark.integration
BUCKET = "kappa-outage"


@pytest.fixture
def lakehouse(kafka_broker, spark, settings, object_store, tmp_path):
    # One retry at each of S3A's two levels: the stream and the audit fail in seconds, not after minutes of retries.
    with stream_on_object_store(settings, object_store, BUCKET, tmp_path, max_offsets=100, s3_retries=1) as lakehouse:
        try:
            yield lakehouse
        finally:
            object_store.start()  # the session's other tests need it, whatever happened here


def test_a_stream_fails_while_the_object_store_is_down_and_resumes_without_loss_once_it_is_back(
        spark, lakehouse, object_store, tmp_path, monkeypatch, capsys):
    local = lakehouse
    produce_hard_cases(local, total=400, seed=71)
    output = tmp_path / "stream.log"
    stream = subprocess.Popen([sys.executable, "-m", "spark_apps.cli", "stream", "--continuous"],
                              env={**os.environ, **local.as_env()}, cwd=PROJECT_ROOT, stdout=output.open("w"),
                              stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: heartbeat_path(local, PIPELINE.name).exists() or stream.poll() is not None,
                 "the stream's first heartbeat", 300)
        produce_hard_cases(local, total=400, seed=72)  # more batches under way when the store goes
        object_store.stop()
        assert stream.wait(timeout=600) != 0, "the stream fails without its store"
    finally:
        if stream.poll() is None:
            stream.kill()
            stream.wait()
    failure = output.read_text()
    assert "Traceback" not in failure, failure[-3000:]

    for key, value in local.as_env().items():
        monkeypatch.setenv(key, value)
    assert main(["reconcile"]) == 1
    refused = capsys.readouterr().err.strip().splitlines()
    assert len(refused) == 1 and refused[0].startswith("kappa reconcile: ") and "object store" in refused[0], refused
    assert storage_key(PIPELINE.name) in incidents.read_open(local.alerts_incidents), "on-call was paged"

    object_store.start()
    target = resolve(spark, local, PIPELINE.name)
    StreamJob(spark, local, target).run(until_caught_up=True)
    commits = list(delta_log.commits(table_path(local, PIPELINE.tables().store)))
    batches = [c.meta["batch_id"] for c in commits if "batch_id" in c.meta]
    assert sorted(batches) == lineage.committed_batches(target.checkpoint), "every micro-batch once, none lost"
    outcome = reconcile(spark, local, target, run_id="outage.exact")
    assert outcome.reconciliation.success, outcome.reconciliation.lines
    assert storage_key(PIPELINE.name) not in incidents.read_open(local.alerts_incidents), "the page resolved"
