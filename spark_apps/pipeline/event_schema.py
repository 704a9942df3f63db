"""How a pipeline declares its events: fields, types and the rules a valid event obeys.

One declaration serves the generator, the Spark parser, validation and the docs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

FieldKind = Literal["string", "long", "double", "decimal", "boolean", "date", "timestamp"]
NUMERIC_KINDS = frozenset({"long", "double", "decimal"})

# ISO-8601 UTC with milliseconds, e.g. 2026-11-21T19:22:03.123Z: what the platform's generators write.
TIMESTAMP_SPARK_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSX"
# What a timestamp field accepts: ISO-8601 with a 'T', seconds, 0 to 6 fraction digits (Spark keeps
# microseconds, so more would round) and an offset that is required, as Z, +hh:mm, +hhmm or +hh. A time
# without an offset would depend on the session's time zone, so stream and batch could disagree.
TIMESTAMP_INPUT_FORMATS = tuple(f"yyyy-MM-dd'T'HH:mm:ss[.SSSSSS]{offset}" for offset in ("XXX", "XX", "X"))
DATE_INPUT_FORMAT = "yyyy-MM-dd"


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
    precision: int | None = None  # decimal only: digits in all
    scale: int | None = None  # decimal only: digits after the point
    epoch_millis: bool = False  # timestamp only: a JSON integer of milliseconds since 1970 instead of ISO-8601

    def __post_init__(self) -> None:
        if self.kind not in get_args(FieldKind):
            kinds = ", ".join(get_args(FieldKind))
            raise ValueError(f"field {self.name!r}: unknown kind {self.kind!r}; one of {kinds}")
        if self.kind == "decimal":
            if self.precision is None or self.scale is None or not 0 <= self.scale <= self.precision <= 38:
                raise ValueError(f"decimal field {self.name!r} needs 0 <= scale <= precision <= 38, "
                                 f"got precision={self.precision} scale={self.scale}")
        elif self.precision is not None or self.scale is not None:
            raise ValueError(f"field {self.name!r}: precision and scale belong to decimal fields only")
        if self.epoch_millis and self.kind != "timestamp":
            raise ValueError(f"field {self.name!r}: epoch_millis belongs to timestamp fields only")
        if self.min_value is not None and self.kind not in NUMERIC_KINDS:
            raise ValueError(f"field {self.name!r}: min_value belongs to number fields only")
        if self.max_length is not None and self.kind != "string":
            raise ValueError(f"field {self.name!r}: max_length belongs to string fields only")

    @property
    def spark_type(self) -> str:
        """The Spark SQL type of the field's typed column."""
        if self.kind == "decimal":
            return f"decimal({self.precision},{self.scale})"
        return {"long": "bigint"}.get(self.kind, self.kind)

    @property
    def type_label(self) -> str:
        """The kind as the docs show it, e.g. ``decimal(12,2)`` or ``timestamp (epoch ms)``."""
        kind = self.spark_type if self.kind == "decimal" else self.kind
        return kind + (" (epoch ms)" if self.epoch_millis else "")

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
4. every present field of that type has its type, in schema order (`wrong_type:<name>`):
   - string: a JSON string; boolean: JSON `true` or `false`;
   - long: a JSON integer that fits 64 bits (not `12.0`, `1e3` or `"12"`);
   - double: any JSON number (an integer, a fraction or an exponent), read as the nearest double;
   - decimal(p, s): a JSON integer or fraction with at most s digits after the point that fits p digits,
     kept exactly (never rounded; exponents are refused);
   - date: a string `yyyy-MM-dd` that names a real day;
   - timestamp: a string in ISO-8601 with a `T`, seconds, 0 to 6 fraction digits and a required offset
     (`Z`, `+02:00`, `+0200` or `+02`), e.g. `2026-11-21T19:22:03Z` or `2026-11-21T21:22:03.5+02:00`; a
     field declared `epoch_millis` takes a JSON integer of milliseconds since 1970-01-01T00:00:00Z instead;
5. the schema version is a known version (`unsupported_schema_version`);
6. numbers (long, double, decimal) respect their minimum, in schema order (`below_minimum:<name>`, e.g. a
   negative amount);
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
        rows.append(f"| `{spec.name}` | {spec.type_label} | {'yes' if spec.required else 'no'} | {types} | "
                    f"{'; '.join(rule) or '-'} | v{spec.since_version} | {spec.description} |")
    return "\n".join(rows)
