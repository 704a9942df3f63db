"""Several drivers writing one store on the object store: a running `kappa stream` fences its checkpoint without a
shared disk, maintenance (compaction and OPTIMIZE) commits to the store between its micro-batches without losing or
overwriting a commit, and a stream killed with SIGKILL leaves no fence behind and restarts without loss."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from spark_apps.core.paths import heartbeat_path
from spark_apps.core.settings import PROJECT_ROOT
from spark_apps.core.waiting import wait_for
from spark_apps.io import delta_log, lineage
from spark_apps.io.catalog import table_path
from spark_apps.io.fencing import CheckpointFence, FencedOut
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.ops.maintenance import maintain
from spark_apps.ops.scheduled_audit import reconcile
from spark_apps.stream.job import StreamJob
from spark_apps.target.resolution import resolve, target_of
from spark_apps.transforms.store import COMPACTION
from tests.support.object_store import stream_on_object_store
from tests.support.streams import produce_hard_cases

pytestmark = pytest.mark.integration
BUCKET = "kappa-writers"
MAINTENANCE_ROUNDS = 3


@pytest.fixture(scope="module")
def lakehouse(kafka_broker, spark, settings, object_store, tmp_path_factory):
    # Epochs of two batches of 150 records: compaction (the stream's own and maintenance's) folds a finished epoch,
    # and OPTIMIZE finds two files of one kind in a partition to pack.
    with stream_on_object_store(settings, object_store, BUCKET, tmp_path_factory.mktemp("object-store-writers"),
                                max_offsets=150, compaction_epoch_batches=2) as lakehouse:
        yield lakehouse


def test_stream_and_maintenance_share_a_store_on_the_object_store_and_a_killed_stream_leaves_no_fence(
        spark, lakehouse, tmp_path):
    local = lakehouse
    target = resolve(spark, local, PIPELINE.name)
    produce_hard_cases(local, total=600, seed=23)
    output = tmp_path / "stream.log"
    stream = subprocess.Popen([sys.executable, "-m", "spark_apps.cli", "stream", "--continuous"],
                              env={**os.environ, **local.as_env()}, cwd=PROJECT_ROOT, stdout=output.open("w"),
                              stderr=subprocess.STDOUT)
    rounds = []
    try:
        wait_for(lambda: heartbeat_path(local, PIPELINE.name).exists() or stream.poll() is not None,
                 "the stream's first heartbeat", 300)
        assert stream.poll() is None, output.read_text()[-3000:]
        with pytest.raises(FencedOut) as refused:
            CheckpointFence(target.checkpoint, spark, local).acquire()
        assert f"pid {stream.pid} on " in str(refused.value) and str(target.checkpoint) in str(refused.value)

        for round_ in range(MAINTENANCE_ROUNDS):
            produce_hard_cases(local, total=200, seed=60 + round_)
            # Each round finds an epoch the stream finished since the last: compaction has something to fold.
            wait_for(lambda r=round_: len(lineage.committed_batches(target.checkpoint)) >= 3 + 2 * r
                     or stream.poll() is not None, f"the stream's batches before maintenance round {round_}", 300)
            report = maintain(spark, local, target_of(local, PIPELINE), optimize=True, vacuum=False)
            assert not [t.error for t in report.tables if t.error], report.tables
            rounds.append(report)
        assert stream.poll() is None, output.read_text()[-3000:]
    finally:
        stream.send_signal(signal.SIGKILL)
        stream.wait()

    # The lock is held by the stream's JVM, which exits once it sees its killed Python driver gone (and runs its
    # shutdown hooks first): the catalog database drops the lock with that JVM's connection, not at the SIGKILL.
    fence = CheckpointFence(target.checkpoint, spark, local)
    wait_for(lambda: _took(fence), "the killed stream's JVM to end and its fence to be let go", 120, every_s=1)
    fence.release()
    StreamJob(spark, local, target).run(until_caught_up=True)

    store = table_path(local, PIPELINE.tables().store)
    commits = list(delta_log.commits(store))
    assert sorted(c.version for c in commits) == list(range(len(commits))), "no version is missing"
    batches = [c.meta["batch_id"] for c in commits if "batch_id" in c.meta]
    assert sorted(batches) == lineage.committed_batches(target.checkpoint), "every micro-batch, once"
    # Both compact: the stream as its epochs end, maintenance each round (finding nothing left when the stream was
    # first); the store lock orders their commits, and the log keeps every one.
    compacted = sum(len(c.meta[COMPACTION]["tables"]) for c in commits if COMPACTION in c.meta)
    assert compacted > 0, "compaction committed next to the stream's appends"
    assert compacted >= sum(len(r.compactions) for r in rounds), "no compaction commit was overwritten"
    assert len([t for r in rounds for t in r.tables if t.table == PIPELINE.tables().store]) == MAINTENANCE_ROUNDS
    assert any(c.operation == "OPTIMIZE" for c in commits), "OPTIMIZE committed next to the stream"

    outcome = reconcile(spark, local, resolve(spark, local, PIPELINE.name), run_id="writers.exact")
    assert outcome.reconciliation.success, outcome.reconciliation.lines


def _took(fence: CheckpointFence) -> bool:
    try:
        fence.acquire()
    except FencedOut:
        return False
    return True
