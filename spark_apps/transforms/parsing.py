"""Kafka records -> typed events or dead letters, for any ``EventSchema``.

Pure DataFrame -> DataFrame functions: the stream runs them on each micro-batch and the batch
recompute on the whole log, so both classify every record identically. No I/O, no actions.

The value is parsed once into a Variant, so the exact JSON type of each field is known (an integer is
not ``12.5``, ``1e3`` or ``"123"``); every check and typed column derives from that Variant. All checks
collapse into one CASE WHEN chain in the order of ``VALIDATION_ORDER_DOC``, so the first failing check
names the reason. No UDFs, joins or re-parsing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_apps.pipeline.event_schema import (
    DATE_INPUT_FORMAT,
    NUMERIC_KINDS,
    TIMESTAMP_INPUT_FORMATS,
    EventSchema,
    FieldSpec,
    Reason,
)

COORDINATE_COLUMNS = ("topic", "partition", "offset", "log_append_time", "key", "value")
REASON_COLUMN = "dead_letter_reason"
FINGERPRINT_COLUMN = "payload_fingerprint"

_PARSED = "__parsed_value"
_FIELDS = "__fields"
_DOCUMENT_REASON = "__document_reason"
# What schema_of_variant calls a JSON integer that fits a long; DECIMAL(p,s) is a fraction, DOUBLE an exponent.
_JSON_INTEGER = "^(TINY|SMALL|BIG)?INT$"
_JSON_NUMBER = "^((TINY|SMALL|BIG)?INT|DECIMAL\\(\\d+,\\d+\\)|DOUBLE)$"
_JSON_DECIMAL_SCALE = "^DECIMAL\\(\\d+,(\\d+)\\)$"
_JSON_STRING = "STRING"
_JSON_BOOLEAN = "BOOLEAN"
_JSON_NULL = "VOID"


def parse_records(raw: DataFrame, schema: EventSchema) -> DataFrame:
    """One row per Kafka record: its coordinates, one typed column per schema field, the dead-letter
    reason (null when valid) and the payload fingerprint (null when invalid)."""
    parsed = raw
    for projection in _projections(schema):
        parsed = parsed.select(*projection)
    return parsed


def valid_events(parsed: DataFrame) -> DataFrame:
    """The records that passed every check."""
    return parsed.where(F.col(REASON_COLUMN).isNull())


def dead_letters(parsed: DataFrame) -> DataFrame:
    """The records that failed a check: the raw record with its coordinates and the reason."""
    return (parsed.where(F.col(REASON_COLUMN).isNotNull())
            .select(*COORDINATE_COLUMNS, F.col(REASON_COLUMN).alias("reason")))


def candidate_rows(parsed: DataFrame, schema: EventSchema) -> DataFrame:
    """Every valid record as silver sees it: the typed fields, its log coordinates and fingerprint."""
    return valid_events(parsed).select(*event_columns(schema), "topic", "partition", "offset", "log_append_time",
                                       FINGERPRINT_COLUMN)


def event_columns(schema: EventSchema) -> list[str]:
    """The typed field columns of ``parse_records``, in schema order."""
    return [spec.name for spec in schema.fields]


@cache
def _projections(schema: EventSchema) -> tuple[tuple[Column, ...], ...]:
    """The projections ``parse_records`` stacks, each computing what the next one reads:

    1. the coordinates and the value, parsed once;
    2. the schema's fields of the object as one struct of Variants, found in one pass over the object;
    3. each field's JSON type and its value as the Spark type, and the verdict on the document;
    4. each field's facts as booleans: missing, of the right JSON type, carried by the event's type;
    5. the typed columns and the dead-letter reason;
    6. the fingerprint of the typed columns.

    Spark does not merge a projection into the next one when that would copy an expression the next one
    uses several times, so each is computed once per record. The checks of step 5 ask each field's facts
    several times over: as columns of their own they are worked out once (parsing 1.46M records: 21 -> 19.5 s).
    Built once per schema: every Column costs a JVM round trip, hundreds of them take about a second, and
    each micro-batch reuses them.
    """
    _check_field_names(schema)
    parsed, fields = F.col(_PARSED), F.col(_FIELDS)
    inspections = [column for index, spec in enumerate(schema.fields)
                   for column in _inspect(spec, index, fields)]
    values = [F.col(_helper_names(index)[1]) for index in range(len(schema.fields))]
    slots = _slots(schema)
    return (
        (*_coordinates(), _parse_value(F.col("value")).alias(_PARSED)),
        (*COORDINATE_COLUMNS, parsed, F.try_variant_get(parsed, "$[0]", _fields_type(schema)).alias(_FIELDS)),
        (*COORDINATE_COLUMNS, _document_reason(parsed, fields).alias(_DOCUMENT_REASON), *inspections),
        (*COORDINATE_COLUMNS, F.col(_DOCUMENT_REASON), *values, *_facts(schema)),
        (*COORDINATE_COLUMNS, *_typed_columns(slots), _reason(schema, slots).alias(REASON_COLUMN)),
        (F.col("*"), _fingerprint(schema).alias(FINGERPRINT_COLUMN)),
    )


def _check_field_names(schema: EventSchema) -> None:
    """Refuse names that would clash with another output column: Spark matches names ignoring case."""
    taken = {name.lower() for name in (*COORDINATE_COLUMNS, REASON_COLUMN, FINGERPRINT_COLUMN)}
    for spec in schema.fields:
        if not spec.name or spec.name.lower() in taken:
            raise ValueError(f"event field name {spec.name!r} is empty or clashes with another column")
        taken.add(spec.name.lower())


def _quoted(name: str) -> str:
    """A name as a Spark SQL identifier, whatever characters it holds."""
    return "`" + name.replace("`", "``") + "`"


def _coordinates() -> list[Column]:
    """Where the record sits in the log, and the record itself: kept for every row, valid or not."""
    return [F.col("topic"), F.col("partition"), F.col("offset"), F.col("timestamp").alias("log_append_time"),
            F.col("key"), F.col("value")]


def _parse_value(value: Column) -> Column:
    """The value as the only element of a Variant array, null if it is not valid UTF-8 or not JSON.

    Invalid UTF-8 is refused first, because Spark would parse it with replacement characters. Spark's
    parser also stops after the first JSON value and ignores the rest (``{...} junk``, two events in one
    record); inside the array such trailing content becomes a syntax error or a second element, still in
    a single parse. Only trailing content that starts by closing the array (``{...}]...``) goes
    unnoticed. Duplicate keys make the value null too (ambiguous JSON).
    """
    text = F.try_validate_utf8(value.cast("string"))
    return F.try_parse_json(F.concat(F.lit("["), text, F.lit("]")))


def _fields_type(schema: EventSchema) -> str:
    """A struct of Variants, one per schema field: casting the object to it matches keys exactly (case
    too) and ignores unknown keys; anything but an object gives null."""
    return "struct<" + ", ".join(f"{_quoted(spec.name)}: variant" for spec in schema.fields) + ">"


def _document_reason(parsed: Column, fields: Column) -> Column:
    """Check 1: null for exactly one JSON object, else ``not_a_json_object`` or ``malformed_json``.

    The costlier test (copying out the value) only runs for records that are not objects.
    """
    single = F.try_variant_get(parsed, "$[1]", "variant").isNull()
    is_value = F.try_variant_get(parsed, "$[0]", "variant").isNotNull()
    return (F.when(single & fields.isNotNull(), F.lit(None).cast("string"))
            .when(single & is_value, F.lit(Reason.NOT_AN_OBJECT))
            .otherwise(F.lit(Reason.MALFORMED_JSON)))


def _helper_names(index: int) -> tuple[str, str]:
    """The helper columns of the field at this position: its JSON type and its value."""
    return f"__json_type_{index}", f"__value_{index}"


def _fact_names(index: int) -> tuple[str, str, str]:
    """The boolean columns of the field at this position: missing, well typed, carried."""
    return f"__missing_{index}", f"__well_typed_{index}", f"__carried_{index}"


def _inspect(spec: FieldSpec, index: int, fields: Column) -> list[Column]:
    """The field's JSON type, ``schema_of_variant`` of it (STRING, BIGINT, DECIMAL(3,1), VOID for a JSON
    null...; null when absent), and its value as the Spark type, trustworthy only when the type is right."""
    field = fields.getField(spec.name)
    json_type_name, value_name = _helper_names(index)
    return [F.schema_of_variant(field).alias(json_type_name), _typed_value(spec, field).alias(value_name)]


def _typed_value(spec: FieldSpec, field: Column) -> Column:
    """The field's Variant as the kind's Spark type; dates and timestamps are read from their text with the
    accepted patterns only, so nothing depends on the session's time zone or on Spark's lenient casts."""
    if spec.kind == "timestamp" and spec.epoch_millis:
        return F.timestamp_millis(F.try_variant_get(field, "$", "bigint"))
    if spec.kind == "timestamp":
        text = F.try_variant_get(field, "$", "string")
        return F.coalesce(*[F.try_to_timestamp(text, F.lit(pattern)) for pattern in TIMESTAMP_INPUT_FORMATS])
    if spec.kind == "date":
        return F.try_to_date(F.try_variant_get(field, "$", "string"), DATE_INPUT_FORMAT)
    return F.try_variant_get(field, "$", spec.spark_type)


@dataclass(frozen=True)
class _Slot:
    """What the checks ask about one field, as Columns over its helper columns."""

    spec: FieldSpec
    value: Column
    missing: Column
    well_typed: Column
    carried: Column


_Slots = dict[str, _Slot]


def _facts(schema: EventSchema) -> list[Column]:
    """Each field's missing, well-typed and carried verdicts, from its helper columns (``_fact_names``)."""
    typing = {}
    for index, spec in enumerate(schema.fields):
        json_type, value = (F.col(name) for name in _helper_names(index))
        typing[spec.name] = (json_type.isNull() | (json_type == _JSON_NULL), _well_typed(spec, json_type, value))
    type_index = [spec.name for spec in schema.fields].index(schema.type_field)
    event_type = F.when(typing[schema.type_field][1], F.col(_helper_names(type_index)[1]))
    return [column.alias(name) for index, spec in enumerate(schema.fields)
            for column, name in zip((*typing[spec.name], _carried(spec, event_type)), _fact_names(index), strict=True)]


def _slots(schema: EventSchema) -> _Slots:
    """Every field's Columns over its value and fact columns, shared by the typed columns and all the checks."""
    return {spec.name: _Slot(spec, F.col(_helper_names(index)[1]), *(F.col(name) for name in _fact_names(index)))
            for index, spec in enumerate(schema.fields)}


def _well_typed(spec: FieldSpec, json_type: Column, value: Column) -> Column:
    """The JSON type matches the kind exactly; a timestamp must also match the pattern.

    Integers are recognised by a regular expression on purpose: Spark 4.2 counts regular expressions
    as expensive (SPARK-47672) and so keeps a filter on the reason (``valid_events``, ``dead_letters``)
    above the projection computing it, instead of inlining every check below it, which would parse the
    JSON once per check.
    """
    if spec.kind == "long" or (spec.kind == "timestamp" and spec.epoch_millis):
        return json_type.rlike(_JSON_INTEGER) & value.isNotNull()
    if spec.kind == "double":
        return json_type.rlike(_JSON_NUMBER) & value.isNotNull()
    if spec.kind == "decimal":
        # No rounding: a fraction's scale must fit, and a value too large for the precision reads as null.
        scale = F.regexp_extract(json_type, _JSON_DECIMAL_SCALE, 1)
        fraction_fits = json_type.rlike(_JSON_DECIMAL_SCALE) & (scale.cast("int") <= spec.scale)
        fits = json_type.rlike(_JSON_INTEGER) | fraction_fits
        return fits & value.isNotNull()
    if spec.kind == "boolean":
        return json_type == _JSON_BOOLEAN
    if spec.kind in ("date", "timestamp"):
        return (json_type == _JSON_STRING) & value.isNotNull()
    return json_type == _JSON_STRING


def _carried(spec: FieldSpec, event_type: Column) -> Column:
    """Whether this event carries the field: type-specific fields only belong to their types."""
    return event_type.isin(*spec.event_types) if spec.event_types else F.lit(True)


def _typed_columns(slots: _Slots) -> list[Column]:
    """Each field's value, null when absent, of the wrong type, or not a field of this event type."""
    return [F.when(slot.carried & slot.well_typed, slot.value).alias(name) for name, slot in slots.items()]


def _reason(schema: EventSchema, slots: _Slots) -> Column:
    """The first failing check of VALIDATION_ORDER_DOC as one CASE WHEN chain, null when all pass."""
    checks = [*_type_checks(schema, slots), *_field_checks(schema, slots)]
    return F.coalesce(F.col(_DOCUMENT_REASON), *[F.when(failed, F.lit(reason)) for failed, reason in checks])


def _type_checks(schema: EventSchema, slots: _Slots) -> list[tuple[Column, str]]:
    """Check 2: the event type is present, a string and a known type."""
    slot = slots[schema.type_field]
    return [
        (slot.missing, Reason.missing(schema.type_field)),
        (~slot.well_typed, Reason.wrong_type(schema.type_field)),
        (~slot.value.isin(*schema.event_types), Reason.UNKNOWN_EVENT_TYPE),
    ]


def _field_checks(schema: EventSchema, slots: _Slots) -> list[tuple[Column, str]]:
    """Checks 3 to 7, each sweeping the fields of the event's type in schema order."""
    fields = list(slots.values())
    numbers = [s for s in fields if s.spec.kind in NUMERIC_KINDS and s.spec.min_value is not None]
    strings = [s for s in fields if s.spec.kind == "string" and s.spec.max_length is not None]
    return [
        *[(s.carried & s.missing, Reason.missing(s.spec.name)) for s in fields if s.spec.required],
        *[(s.carried & ~s.missing & ~s.well_typed, Reason.wrong_type(s.spec.name)) for s in fields],
        (~slots[schema.version_field].value.isin(*schema.versions), Reason.UNSUPPORTED_SCHEMA_VERSION),
        *[(s.carried & (s.value < s.spec.min_value), Reason.below_minimum(s.spec.name)) for s in numbers],
        *[(s.carried & (F.length(s.value) > s.spec.max_length), Reason.oversized(s.spec.name))
          for s in strings],
    ]


def _fingerprint(schema: EventSchema) -> Column:
    """SHA-256 of the typed values as JSON in schema order, so equal content hashes equal whatever the
    key order or spacing of the original. Timestamps enter as epoch microseconds (independent of the
    session time zone); nulls are written out, not dropped."""
    columns = [(spec, F.col(_quoted(spec.name))) for spec in schema.fields]
    values = [(F.unix_micros(column) if spec.kind == "timestamp" else column).alias(spec.name)
              for spec, column in columns]
    canonical = F.to_json(F.struct(*values), {"ignoreNullFields": "false"})
    return F.when(F.col(REASON_COLUMN).isNull(), F.sha2(canonical, 256))
