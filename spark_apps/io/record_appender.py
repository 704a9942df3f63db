"""Keyed records into a kafka-python producer's batches without the per-call work of ``KafkaProducer.send``.

For every record, ``send`` checks its arguments and headers, runs the (absent) serializers, looks the topic's
partitions up twice (building a set each time), asks the partitioner, estimates the record's size, builds a
``TopicPartition`` and formats a debug line: as much time again as appending the record to its batch. For a record
with bytes key and value, no headers and well below the size limit, all of that but the partition comes out the
same every time, so :class:`RecordAppender` does it once per run and then appends each record to the producer's
record accumulator as ``send`` itself would: same partition, same batch, same future, and the sender thread still
gives each batch its producer id and sequence numbers when it drains it, so idempotence is untouched. Any other
record (no key, close to the size limit, or for a topic whose partitions the broker would not tell) goes through
``send``, which also raises its ``MessageSizeTooLargeError``.

It reaches into two attributes kafka-python does not document, the producer's ``_accumulator`` and ``_sender``;
kafka-python is pinned (``requirements.lock``) and the unit tests check both are there and do what is used here.
"""

from __future__ import annotations

from kafka.errors import BrokerResponseError
from kafka.structs import TopicPartition

# More than send()'s size estimate adds to key and value: 61 bytes of batch header, 21 of record overhead and
# at most 11 of length varints. A record this much under the limit cannot be refused for its size.
SIZE_MARGIN = 128


class RecordAppender:
    """Appends records to ``topic`` through ``producer``, whose partitioner must be a
    :class:`~spark_apps.io.key_partitioner.CachedKeyPartitioner` (its key hashes are shared). The topic's
    partitions are looked up once, when made: partitions added to the topic during a run take keys from the next
    run on (the platform never adds any)."""

    def __init__(self, producer, topic: str) -> None:
        self.producer = producer
        self.topic = topic
        self.key_hash = producer.config["partitioner"].key_hash
        self.partitions = [TopicPartition(topic, p) for p in sorted(_partitions(producer, topic))]
        self.small = producer.config["max_request_size"] - SIZE_MARGIN
        self._append = producer._accumulator.append
        self._wakeup = producer._sender.wakeup

    def __call__(self, key: bytes | None, value: bytes):
        """The record's future, as ``send`` returns it."""
        if key is None or not self.partitions or len(key) + len(value) > self.small:
            return self.producer.send(self.topic, key=key, value=value)
        partition = self.partitions[self.key_hash(key) % len(self.partitions)]
        future, batch_is_full, new_batch, _ = self._append(partition, None, key, value, [])
        if batch_is_full or new_batch:
            self._wakeup()
        return future


def _partitions(producer, topic: str) -> set[int]:
    """The topic's partitions, once its metadata is in (``partitions_for`` waits, as ``send`` does for a first
    record); none if the broker refuses them (say, no access to the topic): ``send`` then fails each record's
    future with the broker's error, which the producer reports as unacknowledged records, as it always has."""
    try:
        return producer.partitions_for(topic)
    except BrokerResponseError:
        return set()
