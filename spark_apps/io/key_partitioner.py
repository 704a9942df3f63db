"""Kafka's default key partitioning, with each key's murmur2 hash remembered.

kafka-python hashes every keyed record in pure Python (murmur2, several microseconds a record) and asks the
cluster metadata for the partition list each time; an order's events share one key, so most hashes repeat.
The partition chosen is exactly the default partitioner's (and the Java client's): ``murmur2(key) & 0x7fffffff``
modulo the partition count, so records keep landing where any other producer would put them.
"""

from __future__ import annotations

from kafka.partitioner.default import DefaultPartitioner, murmur2

# Enough for the keys of a few hundred thousand recent records; cleared whole when full (cheap, and keys repeat
# close together).
CACHE_LIMIT = 200_000


class CachedKeyPartitioner(DefaultPartitioner):
    """The default partitioner with a bounded cache of key hashes; records without a key go the default way."""

    def __init__(self, limit: int = CACHE_LIMIT) -> None:
        self.limit = limit
        self._hashes: dict[bytes, int] = {}

    def key_hash(self, key: bytes) -> int:
        """The non-negative murmur2 hash the default partitioner takes the partition from."""
        found = self._hashes.get(key)
        if found is None:
            if len(self._hashes) >= self.limit:
                self._hashes.clear()
            found = self._hashes[key] = murmur2(key) & 0x7FFFFFFF
        return found

    def partition(self, topic, key, serialized_key, value, serialized_value, cluster):
        if serialized_key is None:
            return super().partition(topic, key, serialized_key, value, serialized_value, cluster)
        partitions = cluster.partitions_for_topic(topic)
        if not partitions:
            raise ValueError(f"Topic {topic} not found in ClusterMetadata")
        ordered = sorted(partitions)
        return ordered[self.key_hash(serialized_key) % len(ordered)]
