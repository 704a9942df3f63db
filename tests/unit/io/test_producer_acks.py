"""The producer checks acknowledgements in bulk: every failure is found, and acknowledged futures are let go."""

from __future__ import annotations

from kafka.future import Future

from spark_apps.io.producer import Acks


def test_failures_are_collected_and_only_unfinished_futures_are_kept():
    acks = Acks()
    done, failed, waiting = Future(), Future(), Future()
    for future in (done, failed, waiting):
        acks.add(future)
    done.success("ok")
    failed.failure(ValueError("nope"))
    acks.settle()
    assert [str(e) for e in acks.failures] == ["nope"] and acks.pending == [waiting]


def test_acknowledged_futures_are_let_go_every_so_many_records():
    acks = Acks()
    acks.PRUNE_EVERY = 4
    for _ in range(10):
        future = Future()
        future.success("ok")
        acks.add(future)
    assert len(acks.pending) < 4 and acks.failures == []


def test_a_broker_that_falls_behind_is_looked_at_every_so_many_records_not_at_every_record():
    class Counted(Acks):
        PRUNE_EVERY = 4
        settled = 0

        def settle(self) -> None:
            self.settled += 1
            super().settle()

    acks = Counted()
    for _ in range(20):
        acks.add(Future())
    assert acks.settled == 5 and len(acks.pending) == 20
