"""The appender puts a keyed record into the batch KafkaProducer.send would (the default partitioner's partition, in
order) and leaves keyless and near-limit records to send itself; checked on a real kafka-python producer that
never reaches a broker (a given api_version skips the version probe)."""

from __future__ import annotations

import pytest
from kafka import KafkaProducer
from kafka.errors import TopicAuthorizationFailedError
from kafka.partitioner.default import DefaultPartitioner
from kafka.producer.future import FutureRecordMetadata
from kafka.record.memory_records import MemoryRecords

from spark_apps.io.key_partitioner import CachedKeyPartitioner
from spark_apps.io.record_appender import SIZE_MARGIN, RecordAppender

PARTITIONS = {0, 1, 2}


class Cluster:
    """The three questions kafka-python's default partitioner asks of cluster metadata."""

    def topics(self) -> set[str]:
        return {"t"}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return PARTITIONS

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return PARTITIONS


@pytest.fixture
def producer():
    producer = KafkaProducer(bootstrap_servers="127.0.0.1:1", api_version=(3, 9), enable_idempotence=True,
                             acks="all", partitioner=CachedKeyPartitioner(), metrics_enabled=False,
                             max_request_size=10_000)
    producer.partitions_for = lambda topic: PARTITIONS
    producer.sent = []
    producer.send = lambda topic, key, value: producer.sent.append((topic, key, value)) or "sent"
    yield producer
    producer._accumulator.abort_incomplete_batches()  # nothing can be delivered, and close would wait for it
    producer.close(timeout=0)


def batched(producer) -> dict[int, list[tuple[bytes, bytes]]]:
    """The records waiting in the producer's batches, by partition (closing the batches)."""
    found = {}
    for tp, batches in producer._accumulator._batches.items():
        for batch in batches:
            batch.records.close()
            for records in MemoryRecords(bytes(batch.records.buffer())):
                found.setdefault(tp.partition, []).extend((r.key, r.value) for r in records)
    return found


def test_each_keyed_record_lands_in_the_default_partitioners_partition_in_order(producer):
    keys = [f"ord-1a2b3c4d-{n % 40:08d}".encode() for n in range(300)]
    append = RecordAppender(producer, "t")
    futures = [append(key, b"v%d" % n) for n, key in enumerate(keys)]

    assert all(isinstance(f, FutureRecordMetadata) and not f.is_done for f in futures) and producer.sent == []
    default, expected = DefaultPartitioner(), {}
    for n, key in enumerate(keys):
        expected.setdefault(default.partition("t", key, key, None, None, Cluster()), []).append((key, b"v%d" % n))
    assert batched(producer) == expected


def test_keyless_and_near_limit_records_go_through_send(producer):
    append = RecordAppender(producer, "t")
    near = b"x" * (10_000 - SIZE_MARGIN)
    assert append(None, b"v") == "sent" and append(b"k", near) == "sent"
    assert producer.sent == [("t", None, b"v"), ("t", b"k", near)] and batched(producer) == {}


def test_a_topic_whose_partitions_the_broker_refuses_sends_everything_through_send(producer):
    def refused(topic):
        raise TopicAuthorizationFailedError(topic)

    producer.partitions_for = refused
    assert RecordAppender(producer, "t")(b"k", b"v") == "sent" and producer.sent == [("t", b"k", b"v")]
