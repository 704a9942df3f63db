"""Records written straight to a topic by tests: ISO times as the pipelines' schemas take them, a sensor reading,
and an ordered send."""

from __future__ import annotations

import datetime as dt
import json

from spark_apps.io.producer import make_producer


def iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def sensor_reading(reading_id: str, at: dt.datetime, device: str = "dev-h") -> tuple[str, bytes]:
    """A (key, value) record of the tests' sensor pipeline."""
    return device, json.dumps({"reading_id": reading_id, "kind": "reading", "measured_at": iso(at),
                               "schema_version": 1, "device_id": device, "celsius_tenths": 200}).encode()


def send(settings, topic: str, records: list[tuple[str, bytes]]) -> None:
    """Append (key, value) records in this order (one partition keeps it)."""
    producer = make_producer(settings)
    try:
        for key, value in records:
            producer.send(topic, key=key.encode(), value=value)
        producer.flush()
    finally:
        producer.close()
