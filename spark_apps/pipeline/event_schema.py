"""How a pipeline declares its events: fields, types and the rules a valid event obeys.

One declaration serves the generator, the Spark parser, validation and the docs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

FieldKind = Literal["string", "long", "timestamp"]

# ISO-8601 UTC with milliseconds, e.g. 2026-11-21T19:22:03.123Z.
TIMESTAMP_SPARK_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSX"


@dataclass(frozen=True)
class FieldSpec:
    """One JSON field of an event and the rules a valid value obeys.

    ``event_types`` empty means the field belongs to every event type.
    """

    name: str
    kind: FieldKind
    description: str = ""
    required: bool = True
    event_types: tuple[str, ...] = ()
    max_length: int | None = None
    min_value: int | None = None
    since_version: int = 1

    def applies_to(self, event_type: str) -> bool:
        return not self.event_types or event_type in self.event_types


@dataclass(frozen=True)
class EventSchema:
    """The events of one pipeline: a JSON object per Kafka record.

    ``key_field`` names the entity an event belongs to, whose value is the record's Kafka key (so that one
    entity's events stay in one partition, in order); ``None`` sends events without a key.
    """

    fields: tuple[FieldSpec, ...]
    event_types: tuple[str, ...]
    versions: tuple[int, ...] = (1,)
    id_field: str = "event_id"
    type_field: str = "event_type"
    time_field: str = "event_time"
    version_field: str = "schema_version"
    key_field: str | None = None
    by_name: dict[str, FieldSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [spec.name for spec in self.fields]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate field names in event schema: {names}")
        object.__setattr__(self, "by_name", {spec.name: spec for spec in self.fields})
        for required in (self.id_field, self.type_field, self.time_field, self.version_field):
            if required not in self.by_name:
                raise ValueError(f"event schema needs a field named {required!r}")
        if self.key_field is not None and self.key_field not in self.by_name:
            raise ValueError(f"key field {self.key_field!r} is not a field of the event schema")
        if self.by_name[self.time_field].kind != "timestamp":
            raise ValueError(f"{self.time_field!r} must be of kind 'timestamp'")

    def key_of(self, event: dict) -> bytes | None:
        """The Kafka key of an event: its ``key_field`` value, or none (no key field, or the event lacks it)."""
        value = event.get(self.key_field) if self.key_field else None
        return None if value is None else str(value).encode()

    def fields_for(self, event_type: str) -> tuple[FieldSpec, ...]:
        """The fields an event of this type carries."""
        return tuple(spec for spec in self.fields if spec.applies_to(event_type))


class Reason:
    """Dead-letter reasons. Checks run in the order of VALIDATION_ORDER_DOC; the first failure wins."""

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
2. the type field is present and a string (`missing_field:` / `wrong_type:event_type`),
   and one of the known types (`unknown_event_type`);
3. every required field of that type is present and not null, in schema order (`missing_field:<name>`);
4. every present field of that type has its type, in schema order (`wrong_type:<name>`): strings are
   JSON strings, longs are JSON integers, timestamps are strings in ISO-8601 UTC with milliseconds;
5. the schema version is a known version (`unsupported_schema_version`);
6. numbers respect their minimum, in schema order (`below_minimum:<name>`, e.g. a negative amount);
7. strings respect their maximum length, in schema order (`oversized_value:<name>`).
Unknown extra fields are ignored (forward compatibility)."""


def markdown_table(schema: EventSchema) -> str:
    """The field reference as a Markdown table (for the README)."""
    rows = ["| field | type | required | event types | rule | since | description |",
            "|---|---|---|---|---|---|---|"]
    for spec in schema.fields:
        rule = []
        if spec.max_length is not None:
            rule.append(f"length <= {spec.max_length}")
        if spec.min_value is not None:
            rule.append(f">= {spec.min_value}")
        types = ", ".join(spec.event_types) or "all"
        rows.append(f"| `{spec.name}` | {spec.kind} | {'yes' if spec.required else 'no'} | {types} | "
                    f"{'; '.join(rule) or '-'} | v{spec.since_version} | {spec.description} |")
    return "\n".join(rows)
