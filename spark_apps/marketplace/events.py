"""The marketplace event schema, written once.

The generator builds events from it, the parser derives its Spark schema and validation rules
from it, and the README's field table is printed from it (``kappa schema``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ORDER_PLACED = "order_placed"
PAYMENT_CAPTURED = "payment_captured"
ORDER_REFUNDED = "order_refunded"
EVENT_TYPES: tuple[str, ...] = (ORDER_PLACED, PAYMENT_CAPTURED, ORDER_REFUNDED)

SCHEMA_VERSIONS: tuple[int, ...] = (1, 2)
LATEST_SCHEMA_VERSION = SCHEMA_VERSIONS[-1]

# ISO-8601 UTC with milliseconds, e.g. 2026-11-21T19:22:03.123Z (Spark pattern below).
EVENT_TIME_SPARK_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSX"

FieldKind = Literal["string", "long", "timestamp"]


@dataclass(frozen=True)
class FieldSpec:
    """One JSON field of an event and the rules a valid value obeys."""

    name: str
    kind: FieldKind
    description: str
    required: bool = True
    event_types: tuple[str, ...] = EVENT_TYPES
    max_length: int | None = None
    min_value: int | None = None
    since_version: int = 1


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

FIELDS_BY_NAME = {spec.name: spec for spec in FIELDS}


def fields_for(event_type: str) -> tuple[FieldSpec, ...]:
    """The fields an event of this type carries."""
    return tuple(spec for spec in FIELDS if event_type in spec.event_types)


class Reason:
    """Dead-letter reasons. Checks run in this order and the first failure is the reason."""

    MALFORMED_JSON = "malformed_json"
    NOT_AN_OBJECT = "not_a_json_object"
    UNKNOWN_EVENT_TYPE = "unknown_event_type"
    UNSUPPORTED_SCHEMA_VERSION = "unsupported_schema_version"

    @staticmethod
    def missing(field_name: str) -> str:
        return f"missing_field:{field_name}"

    @staticmethod
    def wrong_type(field_name: str) -> str:
        return f"wrong_type:{field_name}"

    @staticmethod
    def below_minimum(field_name: str) -> str:
        return f"below_minimum:{field_name}"

    @staticmethod
    def oversized(field_name: str) -> str:
        return f"oversized_value:{field_name}"


VALIDATION_ORDER_DOC = """\
A record is checked in this order; the first failing check names its dead-letter reason:
1. the value is JSON (`malformed_json`) and a JSON object (`not_a_json_object`);
2. `event_type` is present and a string (`missing_field:` / `wrong_type:event_type`),
   and one of the known types (`unknown_event_type`);
3. every required field of that type is present and not null, in schema order (`missing_field:<name>`);
4. every present field has its type, in schema order (`wrong_type:<name>`): strings are JSON strings,
   longs are JSON integers, `event_time` is a string in the ISO-8601 UTC format;
5. `schema_version` is a known version (`unsupported_schema_version`);
6. numbers respect their minimum, in schema order (`below_minimum:<name>`, e.g. a negative amount);
7. strings respect their maximum length, in schema order (`oversized_value:<name>`).
Unknown extra fields are ignored (forward compatibility)."""


def markdown_table() -> str:
    """The field reference as a Markdown table (for the README)."""
    rows = ["| field | type | required | event types | rule | since | description |",
            "|---|---|---|---|---|---|---|"]
    for spec in FIELDS:
        rule = []
        if spec.max_length is not None:
            rule.append(f"length <= {spec.max_length}")
        if spec.min_value is not None:
            rule.append(f">= {spec.min_value}")
        types = "all" if spec.event_types == EVENT_TYPES else ", ".join(spec.event_types)
        rows.append(f"| `{spec.name}` | {spec.kind} | {'yes' if spec.required else 'no'} | {types} | "
                    f"{'; '.join(rule) or '-'} | v{spec.since_version} | {spec.description} |")
    return "\n".join(rows)
