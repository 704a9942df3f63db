"""The producer checks acknowledgements in bulk: every failure is found, acknowledged futures are let go as they
come, and no more than a bounded number of bytes is ever in flight: kafka-python's own accumulator has no bound."""

from __future__ import annotations

import pytest
from kafka.errors import KafkaTimeoutError, NotLeaderForPartitionError
from kafka.future import Future

from spark_apps.io.producer import RECORD_OVERHEAD_BYTES, Acks


class Answered(Future):
    """A record's future whose batch the broker answers when the producer waits for it."""

    waited = 0

    def get(self, timeout):
        Answered.waited += 1
        return self.success("ok").value


def test_failures_are_collected_and_only_unfinished_futures_are_kept():
    acks = Acks()
    waiting, done, failed = Future(), Future(), Future()
    for future in (waiting, done, failed):
        acks.add(future, 10)
    done.success("ok")
    failed.failure(ValueError("nope"))
    acks.settle()
    assert [str(e) for e in acks.failures] == ["nope"] and acks.pending == [waiting]
    assert acks.bytes == 10 + RECORD_OVERHEAD_BYTES


def test_acknowledged_futures_are_let_go_as_they_come():
    acks = Acks()
    for _ in range(10):
        future = Future()
        future.success("ok")
        acks.add(future, 100)
    assert not acks.in_flight and acks.bytes == 0 and acks.failures == []


def test_beyond_the_limit_the_producer_waits_for_the_oldest_records_and_never_holds_more():
    record = 1000 - RECORD_OVERHEAD_BYTES
    acks = Acks(limit_bytes=5000)
    futures = [Answered() for _ in range(20)]
    for future in futures:
        acks.add(future, record)
        assert acks.bytes <= 5000
    assert Answered.waited == 15 and all(f.is_done for f in futures[:15])
    assert acks.pending == futures[15:]


def test_a_record_that_failed_while_the_producer_waited_for_it_is_a_failure():
    class Refused(Future):
        def get(self, timeout):
            self.failure(NotLeaderForPartitionError("not leader"))
            raise self.exception

    acks = Acks(limit_bytes=1)
    acks.add(Refused(), 10)
    assert [type(e) for e in acks.failures] == [NotLeaderForPartitionError] and not acks.in_flight


def test_a_record_never_answered_is_a_failure_and_one_interrupted_while_waiting_stays_to_be_judged():
    class Silent(Future):
        def get(self, timeout):
            raise KafkaTimeoutError("no answer")

    class Interrupted(Future):
        def get(self, timeout):
            raise KeyboardInterrupt

    acks = Acks(limit_bytes=1)
    acks.add(Silent(), 10)
    assert [type(e) for e in acks.failures] == [KafkaTimeoutError] and not acks.in_flight
    waiting = Interrupted()
    with pytest.raises(KeyboardInterrupt):
        acks.add(waiting, 10)
    assert acks.pending == [waiting]
