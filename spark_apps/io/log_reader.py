"""Reading the log with Spark: bounded ranges for batch, an unbounded source for streaming."""

from __future__ import annotations

import json
from collections.abc import Mapping

from spark_apps.core.settings import Settings

Offsets = Mapping[int, int]


def offsets_json(topic: str, offsets: Offsets) -> str:
    """Spark's JSON form of per-partition offsets, e.g. ``{"t": {"0": 12, "1": 7}}``."""
    return json.dumps({topic: {str(p): int(o) for p, o in sorted(offsets.items())}})


def read_log_range(spark, settings: Settings, topic: str, start: Offsets, end: Offsets):
    """Exactly the records ``[start, end)`` of every partition, as Spark's Kafka rows."""
    return (spark.read.format("kafka")
            .option("kafka.bootstrap.servers", settings.kafka_bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffsets", offsets_json(topic, start))
            .option("endingOffsets", offsets_json(topic, end))
            .option("failOnDataLoss", "true")
            .load())
