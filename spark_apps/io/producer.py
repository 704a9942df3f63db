"""Writes events into the log with an idempotent, throughput-tuned kafka-python producer.

Two sources: a pipeline's own generator (:func:`produce`, which also writes the manifest of what was sent) and a
file of events (:func:`produce_file`, read by ``io.event_files``). Every record is keyed by the pipeline's
entity key (``EventSchema.key_field``), so one entity's events stay in one partition, in order.

Guarantees: within one run, retries never duplicate or reorder a record of a partition (producer
idempotence, ``acks=all``). Across runs there is no producer state: re-running with the same seed
and ``base_time_ms`` (or the same file) re-sends byte-identical records, which the platform absorbs as
duplicates (same event id, same payload). A run killed mid-way therefore leaves a prefix that a re-run
repeats exactly, and nothing else.
"""

from __future__ import annotations

import gc
import time
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Protocol, TypeVar

from spark_apps.core.errors import BrokerError, PlatformError
from spark_apps.core.progress import Progress
from spark_apps.core.settings import Settings
from spark_apps.io.event_files import FileRecord
from spark_apps.pipeline.declaration import Pipeline
from spark_apps.pipeline.synthetic import GeneratorRequest, Manifest


class _Record(Protocol):
    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes: ...


R = TypeVar("R", bound=_Record)


@dataclass(frozen=True)
class ProduceResult:
    """What one run wrote; ``manifest`` is the ground truth of a generator run (``None`` for a file)."""

    sent: int
    failed: int
    elapsed_s: float
    interrupted: bool
    manifest: Manifest | None = None
    source: str = ""

    @property
    def rate(self) -> float:
        return self.sent / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def summary(self, topic: str, manifest_path: Path | None) -> str:
        if self.manifest is not None:
            what = ", ".join(f"{kind} {count:,}" for kind, count in sorted(self.manifest.counts_by_kind.items()))
        else:
            what = f"from {self.source}"
        where = f"; manifest {manifest_path}" if manifest_path else ""
        state = " (interrupted; everything sent was flushed)" if self.interrupted else ""
        return (f"produced {self.sent:,} records to {topic} in {self.elapsed_s:.1f}s "
                f"({self.rate:,.0f} records/s; {what}; failed {self.failed}){state}{where}")


# How long a batch may wait for more records: long when sending flat out (fewer, fuller requests; batches that
# fill are sent at once anyway), short when paced, where waiting would only add latency.
THROUGHPUT_LINGER_MS = 200
PACED_LINGER_MS = 20


def make_producer(settings: Settings, linger_ms: int = PACED_LINGER_MS, max_record_bytes: int = 4 * 1024 * 1024):
    """An idempotent producer tuned for throughput from one Python process: 1 MiB batches, lz4
    (cheap to compress, and fewer bytes to checksum and write) and cached key hashes. kafka-python does all of it
    in Python; the ``crc32c`` and ``lz4`` packages (kafka-python's extras) keep the checksum and the codec in C."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    from spark_apps.io.key_partitioner import CachedKeyPartitioner

    try:
        return KafkaProducer(
            bootstrap_servers=settings.kafka_bootstrap_servers,
            client_id="kappa-producer",
            enable_idempotence=True,
            acks="all",
            linger_ms=linger_ms,
            batch_size=1024 * 1024,
            compression_type="lz4",
            partitioner=CachedKeyPartitioner(),
            bootstrap_timeout_ms=10_000,
            metrics_enabled=False,
            max_in_flight_requests_per_connection=5,
            max_request_size=max_record_bytes,
        )
    except KafkaError as exc:
        raise BrokerError(f"cannot reach Kafka at {settings.kafka_bootstrap_servers} ({type(exc).__name__}); "
                          "is it running? `make up` starts the embedded broker") from None


# How many records a run sent flat out draws from its source at a time (see _read_ahead).
READ_AHEAD = 4096


def _read_ahead(records: Iterable[R]) -> Iterator[R]:
    """The records in order, drawn from ``records`` READ_AHEAD at a time.

    Drawing a few thousand records from a generator and then appending them all to the producer's batches runs each
    side's code while it is still in the CPU's caches; alternating record by record took about a third longer."""
    iterator = iter(records)
    while portion := list(islice(iterator, READ_AHEAD)):
        yield from portion


def _paced(records: Iterable[R], rate: float) -> Iterator[R]:
    """Hold records back so that on average no more than ``rate`` leave per second."""
    started = time.monotonic()
    for index, record in enumerate(records):
        ahead = started + index / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
        yield record


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Switch Python's cyclic garbage collector off for a run sent flat out.

    Every record sent stays alive to the end of the run (the manifest is built from them) and its future until its
    batch is acknowledged, so the collector's full passes, each over every object of the process, came back about
    every second and took a fifth of the run's CPU time. The send loop leaves almost no garbage that only the
    collector frees (about 2,500 objects in 200,000 records): it is collected once the collector is back on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# The bytes of records in flight (appended, not yet acknowledged) beyond which ``send`` waits for the oldest.
# kafka-python's accumulator has no bound (its producer has no buffer.memory), so a producer that outran the broker
# held every record in between: a 1 GiB file's run peaked at 451 MiB. 32 MiB is the Java producer's buffer.memory.
IN_FLIGHT_BYTES = 32 * 2**20
# What a record in flight holds besides its key and value: its future and its entries here and in its batch.
RECORD_OVERHEAD_BYTES = 200
# How long the producer waits for the oldest record's answer: beyond kafka-python's delivery timeout (120 s), after
# which the record would have failed had its sender been alive.
ANSWER_TIMEOUT_S = 180.0


class Acks:
    """The futures of records in flight, oldest first, checked without a callback per record.

    Acknowledged ones are let go as they come, and ``add`` waits for the oldest while the records in flight hold more
    than ``limit_bytes``, as the Java producer blocks on ``buffer.memory``: the producer's memory stays flat however
    far it could run ahead of the broker."""

    def __init__(self, limit_bytes: int = IN_FLIGHT_BYTES) -> None:
        self.limit_bytes = limit_bytes
        self.in_flight: deque[tuple[Any, int]] = deque()
        self.bytes = 0
        self.failures: list[BaseException] = []

    def add(self, future, size: int) -> None:
        """Track one record's future; ``size`` is its key's and value's bytes."""
        held = size + RECORD_OVERHEAD_BYTES
        self.in_flight.append((future, held))
        self.bytes += held
        while self.in_flight and (self.in_flight[0][0].is_done or self.bytes > self.limit_bytes):
            self._let_go_oldest()

    def _let_go_oldest(self) -> None:
        """Wait for the oldest record's answer (kafka-python fails it after its delivery timeout, 120 s), then let it
        go; it is let go only once answered, so a Ctrl-C meanwhile leaves it for ``settle`` to judge."""
        from kafka.errors import KafkaError, KafkaTimeoutError

        future, held = self.in_flight[0]
        if not future.is_done:
            with suppress(KafkaError):  # a failed record is noted below, like any other
                future.get(timeout=ANSWER_TIMEOUT_S)
        self.in_flight.popleft()
        self.bytes -= held
        if not future.is_done:
            self.failures.append(KafkaTimeoutError(f"no answer within {ANSWER_TIMEOUT_S:.0f}s"))
        elif future.failed():
            self.failures.append(future.exception)

    @property
    def pending(self) -> list:
        """The futures not answered yet."""
        return [future for future, _ in self.in_flight if not future.is_done]

    def settle(self) -> None:
        """Note the failures among the finished futures and keep only the unfinished ones."""
        kept: deque[tuple[Any, int]] = deque()
        for future, held in self.in_flight:
            if not future.is_done:
                kept.append((future, held))
            elif future.failed():
                self.failures.append(future.exception)
        self.in_flight = kept
        self.bytes = sum(held for _, held in kept)


def send(settings: Settings, topic: str, records: Iterable[R], total: int | None, rate: float | None = None,
         show_progress: bool = True, keep: bool = True) -> tuple[list[R], int, float, bool]:
    """Send ``records`` in order; flush on Ctrl-C. Returns what was sent (only with ``keep``: holding every record
    of a run of millions takes gigabytes), how many, the seconds it took and whether it was interrupted; raises if
    Kafka did not acknowledge a record, or if a record was too large to send (after sending every other one, so one
    oversized record costs the run nothing else)."""
    from kafka.errors import MessageSizeTooLargeError

    from spark_apps.io.record_appender import RecordAppender
    from spark_apps.io.topics import max_message_bytes

    limit = max_message_bytes(settings, topic)
    producer = make_producer(settings, PACED_LINGER_MS if rate else THROUGHPUT_LINGER_MS, max_record_bytes=limit)
    acks = Acks()
    sent: list[R] = []
    count = 0
    too_large: list[int] = []
    progress = Progress(f"producing to {topic}", total) if show_progress else None
    interrupted = False
    started = time.monotonic()
    # A paced run spends its time asleep and may run for hours beside other work of the process (the latency
    # bench's stream), so only a run sent flat out pauses the collector.
    try:
        with nullcontext() if rate else _cyclic_gc_paused():
            append = RecordAppender(producer, topic)
            for number, record in enumerate(_paced(records, rate) if rate else _read_ahead(records), start=1):
                try:
                    acks.add(append(record.key, record.value), len(record.value) + len(record.key or b""))
                except MessageSizeTooLargeError:
                    too_large.append(number)
                    continue
                count += 1
                if keep:
                    sent.append(record)
                if progress:
                    progress.advance()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        producer.flush()
        producer.close()
        if progress:
            progress.close()
    elapsed = time.monotonic() - started
    acks.settle()
    if acks.failures or acks.pending:
        problem = acks.failures[0] if acks.failures else "no answer after the final flush"
        raise PlatformError(f"{len(acks.failures) + len(acks.pending)} of {count} records were not "
                            f"acknowledged by Kafka: {problem!r}")
    if too_large:
        shown = ", ".join(map(str, too_large[:5])) + (", ..." if len(too_large) > 5 else "")
        raise PlatformError(f"{len(too_large)} of {count + len(too_large)} records were not sent: larger than "
                            f"topic {topic}'s max.message.bytes ({limit:,} bytes); record number {shown}. The other "
                            f"{count:,} were sent and acknowledged. Split those events, or raise the topic's "
                            "max.message.bytes (`kappa kafka configs --alter`)")
    return sent, count, elapsed, interrupted


def produce(settings: Settings, pipeline: Pipeline, request: GeneratorRequest, topic: str | None = None,
            rate: float | None = None, manifest_path: Path | None = None,
            show_progress: bool = True, with_manifest: bool = True) -> ProduceResult:
    """Send the ``request.events`` records of the pipeline's generator; write the manifest of what was sent.

    Without ``with_manifest`` nothing sent is kept and the result has no manifest: a manifest holds every event,
    which a run of millions (the bench's) cannot afford."""
    generate = pipeline.require_generator("producing synthetic events (give --file to send events from a file)")
    topic = topic or pipeline.source_topic(settings)
    sent, count, elapsed, interrupted = send(settings, topic, generate(request), request.events, rate, show_progress,
                                             keep=with_manifest)
    manifest = Manifest.from_records(asdict(request), sent) if with_manifest else None
    if manifest and manifest_path:
        manifest_path.parent.mkdir(parents=True, exist_ok=True)
        manifest.to_json(manifest_path)
    return ProduceResult(sent=count, failed=0, elapsed_s=elapsed, interrupted=interrupted, manifest=manifest)


def produce_file(settings: Settings, topic: str, records: Iterable[FileRecord], source: str,
                 rate: float | None = None, show_progress: bool = True) -> ProduceResult:
    """Send the events of a file as ``io.event_files`` reads them, drawn as they are sent, never held whole."""
    _, count, elapsed, interrupted = send(settings, topic, records, None, rate, show_progress, keep=False)
    return ProduceResult(sent=count, failed=0, elapsed_s=elapsed, interrupted=interrupted, source=source)
