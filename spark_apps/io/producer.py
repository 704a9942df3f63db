"""Writes generated events into the log with an idempotent, throughput-tuned kafka-python producer.

Guarantees: within one run, retries never duplicate or reorder a record of a partition (producer
idempotence, ``acks=all``). Across runs there is no producer state: re-running with the same seed
and ``base_time_ms`` re-sends byte-identical records, which the platform absorbs as duplicates
(same ``event_id``, same payload). A run killed mid-way therefore leaves a prefix that a re-run
repeats exactly, and nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from spark_apps.core.errors import BrokerError, PlatformError
from spark_apps.core.progress import Progress
from spark_apps.core.settings import Settings
from spark_apps.marketplace.generator import GeneratedRecord, GeneratorConfig, Manifest, generate


@dataclass(frozen=True)
class ProduceResult:
    """What one run wrote."""

    sent: int
    failed: int
    elapsed_s: float
    interrupted: bool
    manifest: Manifest

    @property
    def rate(self) -> float:
        return self.sent / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def summary(self, topic: str, manifest_path: Path | None) -> str:
        kinds = ", ".join(f"{kind} {count:,}" for kind, count in sorted(self.manifest.counts_by_kind.items()))
        where = f"; manifest {manifest_path}" if manifest_path else ""
        state = " (interrupted; everything sent was flushed)" if self.interrupted else ""
        return (f"produced {self.sent:,} records to {topic} in {self.elapsed_s:.1f}s "
                f"({self.rate:,.0f} records/s; {kinds}; failed {self.failed}){state}{where}")


def make_producer(settings: Settings):
    """An idempotent producer tuned for throughput: large batches, a short linger."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    try:
        return KafkaProducer(
            bootstrap_servers=settings.kafka_bootstrap_servers,
            client_id="kappa-producer",
            enable_idempotence=True,
            acks="all",
            linger_ms=20,
            batch_size=512 * 1024,
            bootstrap_timeout_ms=10_000,
            metrics_enabled=False,
            max_in_flight_requests_per_connection=5,
            max_request_size=4 * 1024 * 1024,
        )
    except KafkaError as exc:
        raise BrokerError(f"cannot reach Kafka at {settings.kafka_bootstrap_servers} ({type(exc).__name__}); "
                          "is it running? `make up` starts the embedded broker") from None


def _paced(records: Iterator[GeneratedRecord], rate: float | None) -> Iterator[GeneratedRecord]:
    """Hold records back so that on average no more than ``rate`` leave per second."""
    if not rate:
        yield from records
        return
    started = time.monotonic()
    for index, record in enumerate(records):
        ahead = started + index / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
        yield record


def produce(settings: Settings, config: GeneratorConfig, topic: str | None = None, rate: float | None = None,
            manifest_path: Path | None = None, show_progress: bool = True) -> ProduceResult:
    """Send ``config.total_events`` generated records; flush on Ctrl-C; write the manifest of what was sent."""
    topic = topic or settings.events_topic
    producer = make_producer(settings)
    failures: list[BaseException] = []
    sent: list[GeneratedRecord] = []
    progress = Progress(f"producing to {topic}", config.total_events) if show_progress else None
    interrupted = False
    started = time.monotonic()
    try:
        for record in _paced(generate(config), rate):
            producer.send(topic, key=record.key, value=record.value).add_errback(failures.append)
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
    if failures:
        raise PlatformError(f"{len(failures)} of {len(sent)} records were not acknowledged by Kafka: "
                            f"{failures[0]!r}")
    manifest = Manifest.from_records(config, sent)
    if manifest_path:
        manifest_path.parent.mkdir(parents=True, exist_ok=True)
        manifest.to_json(manifest_path)
    return ProduceResult(sent=len(sent), failed=len(failures), elapsed_s=elapsed, interrupted=interrupted,
                         manifest=manifest)
