"""Independent Delta writes at the same time, each in a session of its own (``write_in_parallel``), and independent
reads of one session at the same time (``in_parallel``).

A micro-batch's gold tables, and an audit's snapshot tables, were written one after another although none reads
another's write. For small batches the writes overlap well even on two cores: with 300-record batches the three
gold MERGEs took 6.4-8.9 s together against 8.0-10.3 s in a row (docs/scaling.md). At 20,000 records the cores
are busy all through each MERGE and the overlap gains nothing.

They cannot share one session: an idempotent MERGE marks itself with session settings (``txnAppId``/``txnVersion``,
reset after each commit), and two writes would take each other's. Each write therefore runs in a clone of the
caller's session, which starts with the caller's settings (commit metadata, execution mode) and keeps its own
changes to itself. The caller's thread-local Spark properties (a job group) go with each write, so the jobs it
starts are counted where the caller's are.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from spark_apps.core.progress import timed

T = TypeVar("T")
K = TypeVar("K")
# At most this many writes run at once: more only queue for the same cores, each holding its own frames.
MAX_PARALLEL_WRITES = 4


def cloned_session(spark):
    """A session with ``spark``'s settings, temporary views and catalog state, on the same SparkContext; what it
    sets later is its own."""
    from pyspark.sql import SparkSession

    return SparkSession(spark.sparkContext, spark._jsparkSession.cloneSession())


def write_in_parallel(spark, writes: Mapping[str, Callable[[object], T]], timings: dict[str, float] | None = None,
                      ) -> dict[str, T]:
    """Run the writes (each given the session to use), up to ``MAX_PARALLEL_WRITES`` at once, and wait for all.

    Returns what each write returned, by name; ``timings[name]`` gets each one's seconds. A write that fails fails
    the call with its own error once the others have finished, so none is left running behind the caller. A single
    write runs in the caller's thread and session, as if called directly."""
    timings = {} if timings is None else timings
    if len(writes) <= 1:
        results = {}
        for name, write in writes.items():
            with timed(timings, name):
                results[name] = write(spark)
        return results

    def run(name: str, write: Callable[[object], T], session) -> T:
        with timed(timings, name):
            return write(session)

    sessions = {name: cloned_session(spark) for name in writes}
    return in_parallel(spark, {name: functools.partial(run, name, write, sessions[name])
                               for name, write in writes.items()})


def in_parallel(spark, work: Mapping[K, Callable[[], T]], workers: int = MAX_PARALLEL_WRITES) -> dict[K, T]:
    """Run independent pieces of Spark work (reads, checkpoints, writes in sessions of their own) up to ``workers``
    at once, and wait for all; what each returned, by name. Small queries leave a core idle while the driver plans
    the next one: two at once keep both cores busy. A failure fails the call with its own error once the others have
    finished, so none is left running behind the caller."""
    from pyspark.util import inheritable_thread_target

    with ThreadPoolExecutor(max_workers=max(1, min(len(work), workers)), thread_name_prefix="spark-work") as pool:
        futures = {name: pool.submit(inheritable_thread_target(spark)(call)) for name, call in work.items()}
    errors = [error for error in (future.exception() for future in futures.values()) if error is not None]
    if errors:
        raise errors[0]
    return {name: future.result() for name, future in futures.items()}
