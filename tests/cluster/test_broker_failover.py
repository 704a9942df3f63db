"""A broker of the cluster dies (kill -9) while the generator produces and the stream, on the Spark standalone
master, consumes: the log keeps every acknowledged record (replication factor 3, min.insync.replicas 2, acks=all),
so the stream's tables hold every record once and reconcile exactly with the batch recompute. The warehouse and
checkpoints live in a bucket of the S3 server, and each worker has folders of its own: driver and workers share no
data path."""

from __future__ import annotations

import os
import signal
import time

import pytest

from spark_apps.core.object_path import ObjectPath
from spark_apps.core.waiting import wait_for
from spark_apps.io import delta_log, lineage
from spark_apps.io.catalog import table_path
from spark_apps.io.topics import admin_client, topic_configs
from spark_apps.lab.chaos import Feeder, new_lab, stop_when_caught_up, verify
from spark_apps.lab.checker import summary_line
from spark_apps.services import cluster

pytestmark = pytest.mark.cluster

BACKLOG, DURING_FAILOVER, RATE = 200, 450, 10.0
# The broker dies in the middle of a producer run, so its in-flight batches must find the new leaders.
PRODUCING_BEFORE_KILL_S = 5.0


def partitions(settings) -> list[dict]:
    with admin_client(settings) as admin:
        return admin.describe_topics([settings.events_topic])[0]["partitions"]


def taken_over_from(settings, dead: int) -> bool:
    """Every partition has a leader other than ``dead`` and dropped it from its in-sync replicas. Until the
    controllers fence the dead broker (its session times out), a request may still go to it and fail."""
    from kafka.errors import KafkaError

    try:
        return all(p["leader_id"] != dead and dead not in p["isr_nodes"] for p in partitions(settings))
    except KafkaError:
        return False


def test_killing_the_partition_leader_mid_stream_loses_and_duplicates_nothing(
        cluster_settings, cluster_app_settings, cluster_spark, tmp_path):
    lab = new_lab(cluster_app_settings, cluster_spark, "failover", tmp_path, seed=31, max_offsets_per_trigger=150)
    try:
        topic = lab.settings.events_topic
        assert {len(p["replica_nodes"]) for p in partitions(lab.settings)} == {3}
        with admin_client(lab.settings) as admin:
            assert topic_configs(admin, topic)["min.insync.replicas"] == "2"

        lab.produce(BACKLOG)
        stream = lab.launch("--continuous")
        stream.wait_started()
        assert cluster_spark.sparkContext.master == cluster.master_url(cluster_settings)
        assert {"kappa-cluster-tests", "kappa-stream-marketplace"} <= set(cluster.running_apps(cluster_settings))
        wait_for(lambda: bool(lab.committed()) or not stream.alive(), "the stream's first micro-batch", 900, 1)
        feeder = Feeder(lab, DURING_FAILOVER, RATE).start()
        time.sleep(PRODUCING_BEFORE_KILL_S)

        leader = next(p["leader_id"] for p in partitions(lab.settings) if p["partition_index"] == 0)
        victim = next(b for b in cluster.brokers(cluster_settings) if b.node.node_id == leader)
        os.kill(victim.pid(), signal.SIGKILL)
        lab.note(f"kill -9 of kafka node {leader}, leader of {topic}-0")
        wait_for(lambda: taken_over_from(lab.settings, leader), "the surviving brokers to take over", 120, 1)

        feeder.finish()
        assert stream.alive(), f"the stream died with the broker: {stream.error()}"
        stop_when_caught_up(lab, stream)
        verdict = verify(lab)
    finally:
        lab.stop_everything()

    assert lab.records >= BACKLOG + DURING_FAILOVER
    assert isinstance(lab.checkpoint, ObjectPath) and lineage.committed_batches(lab.checkpoint), \
        "the stream's checkpoint is in the bucket, on no disk the workers share with the driver"
    assert delta_log.has_commits(table_path(lab.settings, lab.pipeline.tables().store))
    assert summary_line(verdict.check) == "lost=0 duplicated=0 unexpected=0"
    assert verdict.reconciled, "the batch recompute from Kafka differs from the stream's tables"
