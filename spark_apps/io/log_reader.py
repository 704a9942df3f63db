"""Reading the log with Spark: bounded ranges for batch, an unbounded source for streaming."""

from __future__ import annotations

import json
from collections.abc import Mapping

from spark_apps.core.settings import Settings
from spark_apps.pipeline.event_schema import EventSchema

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


def dead_letters_by_reason(spark, settings: Settings, topic: str, start: Offsets, end: Offsets,
                           schema: EventSchema) -> dict[str, int]:
    """How many records of ``[start, end)`` the stream's own parser dead-letters, by reason: what a producer
    can tell its user before any stream has read them."""
    from spark_apps.transforms.parsing import dead_letters, parse_records

    parsed = parse_records(read_log_range(spark, settings, topic, start, end), schema)
    return {row["reason"]: row["count"] for row in dead_letters(parsed).groupBy("reason").count().collect()}
