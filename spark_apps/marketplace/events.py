"""The marketplace event schema, written once.

The generator builds events from it, the parser derives its Spark schema and validation rules
from it, and ``kappa schema`` prints it for the docs.
"""

from __future__ import annotations

from spark_apps.pipeline.event_schema import (
    TIMESTAMP_SPARK_FORMAT,
    VALIDATION_ORDER_DOC,
    EventSchema,
    FieldSpec,
    Reason,
)
from spark_apps.pipeline.event_schema import markdown_table as _markdown_table

__all__ = ["EVENT_TIME_SPARK_FORMAT", "EVENT_TYPES", "FIELDS", "FIELDS_BY_NAME", "LATEST_SCHEMA_VERSION",
           "ORDER_PLACED", "ORDER_REFUNDED", "PAYMENT_CAPTURED", "SCHEMA", "SCHEMA_VERSIONS",
           "VALIDATION_ORDER_DOC", "FieldSpec", "Reason", "fields_for", "markdown_table"]

ORDER_PLACED = "order_placed"
PAYMENT_CAPTURED = "payment_captured"
ORDER_REFUNDED = "order_refunded"
EVENT_TYPES: tuple[str, ...] = (ORDER_PLACED, PAYMENT_CAPTURED, ORDER_REFUNDED)

SCHEMA_VERSIONS: tuple[int, ...] = (1, 2)
LATEST_SCHEMA_VERSION = SCHEMA_VERSIONS[-1]
EVENT_TIME_SPARK_FORMAT = TIMESTAMP_SPARK_FORMAT

FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec("event_id", "string", "Unique id of the business event; re-sends keep it.", max_length=64),
    FieldSpec("event_type", "string", "One of " + ", ".join(EVENT_TYPES) + ".", max_length=32),
    FieldSpec("event_time", "timestamp", "When it happened (UTC, ISO-8601 with milliseconds)."),
    FieldSpec("schema_version", "long", "Version of this schema the producer wrote.", min_value=1),
    FieldSpec("order_id", "string", "The order; also the Kafka key.", max_length=64),
    FieldSpec("customer_id", "string", "Who placed the order.", max_length=64),
    FieldSpec("merchant_id", "string", "Who sells.", max_length=64),
    FieldSpec("amount_cents", "long", "Amount of the order, payment or refund in cents.", min_value=0),
    FieldSpec("currency", "string", "ISO-4217 code.", max_length=3),
    FieldSpec("item_count", "long", "Items in the order.", event_types=(ORDER_PLACED,), min_value=1),
    FieldSpec("payment_method", "string", "card, wallet or bank_transfer.",
              event_types=(PAYMENT_CAPTURED,), max_length=32),
    FieldSpec("refund_reason", "string", "Why the money went back.",
              event_types=(ORDER_REFUNDED,), max_length=64),
    FieldSpec("channel", "string", "web, app or api (added in schema version 2).",
              required=False, max_length=16, since_version=2),
)

SCHEMA = EventSchema(fields=FIELDS, event_types=EVENT_TYPES, versions=SCHEMA_VERSIONS, key_field="order_id")
FIELDS_BY_NAME = SCHEMA.by_name


def fields_for(event_type: str) -> tuple[FieldSpec, ...]:
    """The fields an event of this type carries."""
    return SCHEMA.fields_for(event_type)


def markdown_table() -> str:
    """The marketplace field reference as a Markdown table."""
    return _markdown_table(SCHEMA)
