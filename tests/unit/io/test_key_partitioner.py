"""The producer's cached key partitioner puts every keyed record exactly where kafka-python's default partitioner
(and the Java client) would, however often the key repeats and when its cache is full."""

from __future__ import annotations

import random

from kafka.partitioner.default import DefaultPartitioner
from kafka.partitioner.default import murmur2 as kafka_murmur2

from spark_apps.io.key_partitioner import CachedKeyPartitioner, murmur2


class Cluster:
    """The three questions a partitioner asks of kafka-python's cluster metadata."""

    def __init__(self, partitions: set[int]) -> None:
        self.partitions = partitions

    def topics(self) -> set[str]:
        return {"t"}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions


KEYS = [f"ord-1a2b3c4d-{n:08d}".encode() for n in range(500)] + [b"", b"malformed", "ünï".encode()]


def test_every_key_goes_to_the_default_partitioners_partition_first_time_and_from_the_cache():
    cached, default = CachedKeyPartitioner(), DefaultPartitioner()
    for partitions in ({0, 1, 2}, {0, 1, 2, 3, 4, 5, 6}):
        cluster = Cluster(partitions)
        expected = [default.partition("t", k, k, None, None, cluster) for k in KEYS]
        assert [cached.partition("t", k, k, None, None, cluster) for k in KEYS] == expected
        assert [cached.partition("t", k, k, None, None, cluster) for k in KEYS] == expected
        assert cached._hashes.keys() == set(KEYS)


def test_a_full_cache_is_emptied_and_partitions_stay_the_same():
    cached, default, cluster = CachedKeyPartitioner(limit=10), DefaultPartitioner(), Cluster({0, 1, 2})
    assert [cached.partition("t", k, k, None, None, cluster) for k in KEYS] == \
        [default.partition("t", k, k, None, None, cluster) for k in KEYS]
    assert len(cached._hashes) <= 10


def test_records_without_a_key_go_to_one_of_the_topics_partitions():
    assert CachedKeyPartitioner().partition("t", None, None, b"v", b"v", Cluster({0, 1, 2})) in {0, 1, 2}


def test_murmur2_equals_kafka_pythons_for_every_length_and_byte():
    rng = random.Random(7)
    keys = [bytes(rng.randrange(256) for _ in range(length)) for length in range(70) for _ in range(30)]
    assert [murmur2(k) for k in keys + KEYS] == [kafka_murmur2(k) for k in keys + KEYS]
