"""Kafka's own tools, shipped with the broker's jars and run by `kappa kafka <tool>` against the platform's broker."""

from __future__ import annotations

import re
import subprocess

import pytest

from spark_apps.io.producer import make_producer
from spark_apps.services.broker import EmbeddedBroker
from spark_apps.services.kafka_tools import command

pytestmark = pytest.mark.integration


def tool(settings, name: str, *args: str) -> str:
    done = subprocess.run(command(settings, name, args), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def send(settings, topic: str, rounds: list[list[bytes]]) -> None:
    """Through one platform producer, each round flushed on its own (so it becomes at least one batch)."""
    producer = make_producer(settings)
    try:
        for values in rounds:
            for value in values:
                producer.send(topic, key=b"k", value=value, partition=0)
            producer.flush()
    finally:
        producer.close()


def test_the_console_consumer_reads_a_produced_record(kafka_broker, settings, topic):
    send(settings, topic, [[b'{"hello": "kafka"}']])
    out = tool(settings, "console-consumer", "--topic", topic, "--from-beginning", "--max-messages", "1",
               "--timeout-ms", "60000", "--formatter-property", "print.key=true",
               "--formatter-property", "key.separator=|")
    assert out.strip() == 'k|{"hello": "kafka"}'


def test_the_platforms_producer_writes_idempotent_batches_with_consecutive_sequences(kafka_broker, settings, topic):
    """Read back with Kafka's DumpLogSegments: with enable_idempotence (which kafka-python allows only with
    acks=all) every batch carries a producer id and sequence numbers that continue from batch to batch;
    without it the producer id is -1."""
    send(settings, topic, [[f'{{"n": {r * 10 + i}}}'.encode() for i in range(10)] for r in range(3)])
    segment = EmbeddedBroker(settings).paths.data_dir / f"{topic}-0" / f"{0:020d}.log"
    dumped = tool(settings, "dump-log", "--files", str(segment))
    batches = [dict(re.findall(r"(\w+): (-?\d+)", line)) for line in dumped.splitlines()
               if line.startswith("baseOffset:")]
    assert len(batches) >= 3 and sum(int(b["count"]) for b in batches) == 30, dumped
    assert len({b["producerId"] for b in batches}) == 1 and int(batches[0]["producerId"]) >= 0, dumped
    sequences = [(int(b["baseSequence"]), int(b["lastSequence"])) for b in batches]
    assert sequences[0][0] == 0 and sequences[-1][1] == 29, dumped
    assert all(later[0] == earlier[1] + 1 for earlier, later in zip(sequences, sequences[1:], strict=False)), dumped
