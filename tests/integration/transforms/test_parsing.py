"""parse_records: each Kafka record becomes a typed event or a dead letter named by its first failed check."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, TimestampType
from pyspark.testing import assertDataFrameEqual

from spark_apps.marketplace.events import ORDER_PLACED, ORDER_REFUNDED, PAYMENT_CAPTURED, SCHEMA
from spark_apps.pipeline.event_schema import EventSchema, FieldSpec, Reason
from spark_apps.transforms.parsing import dead_letters, event_columns, parse_records, valid_events

pytestmark = pytest.mark.integration

RAW_COLUMNS = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
               "timestampType int")
APPENDED = datetime(2026, 11, 21, 19, 22, 5, tzinfo=UTC)
EVENT_TIME = "2026-11-21T19:22:03.123Z"
EVENT_INSTANT = datetime(2026, 11, 21, 19, 22, 3, 123000, tzinfo=UTC)
ABSENT = object()
DETAILS = {ORDER_PLACED: {"item_count": 2}, PAYMENT_CAPTURED: {"payment_method": "card"},
           ORDER_REFUNDED: {"refund_reason": "damaged"}}


def event(event_type: Any = ORDER_PLACED, **changes: Any) -> dict[str, Any]:
    """A valid v1 marketplace event of that type, with some fields changed (``ABSENT`` removes one)."""
    payload = {"event_id": "ev-1", "event_type": event_type, "event_time": EVENT_TIME, "schema_version": 1,
               "order_id": "ord-1", "customer_id": "cust-1", "merchant_id": "merch-1", "amount_cents": 1250,
               "currency": "EUR", **DETAILS.get(event_type, {}), **changes}
    return {name: value for name, value in payload.items() if value is not ABSENT}


def encode(value: Any) -> bytes | None:
    """Kafka value bytes: bytes and None (a tombstone) as they are, str as UTF-8, anything else as JSON."""
    if value is None or isinstance(value, bytes):
        return value
    return (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)).encode()


def raw_records(spark, values: list[Any]) -> DataFrame:
    """What Spark's Kafka source delivers for these values, one partition, offsets 0, 1, 2..."""
    rows = [(b"ord-1", encode(value), "events", 0, offset, APPENDED, 1)
            for offset, value in enumerate(values)]
    return spark.createDataFrame(rows, RAW_COLUMNS)


def parse(spark, values: list[Any], schema: EventSchema = SCHEMA) -> DataFrame:
    return parse_records(raw_records(spark, values), schema)


def column_in_offset_order(parsed: DataFrame, name: str) -> list[Any]:
    """One column's values by offset, sorted in Python: an orderBy would add a shuffle to every test."""
    return [row[name] for row in sorted(parsed.select("offset", name).collect(), key=lambda row: row.offset)]


VALID = encode(event())

# Case name (the behaviour) -> (Kafka value, expected dead-letter reason). Grouped by the check that decides.
REASON_CASES: dict[str, tuple[Any, str | None]] = {
    # 1. one JSON object
    "truncated_json_is_malformed": (VALID[:40], Reason.MALFORMED_JSON),
    "invalid_utf8_inside_a_string_is_malformed": (VALID.replace(b'"merch-1"', b'"merch-\xff\xfe"'),
                                                  Reason.MALFORMED_JSON),
    "invalid_utf8_before_the_json_is_malformed": (b"\xff" + VALID, Reason.MALFORMED_JSON),
    "empty_value_is_malformed": (b"", Reason.MALFORMED_JSON),
    "tombstone_is_malformed": (None, Reason.MALFORMED_JSON),
    "trailing_garbage_is_malformed": (VALID + b" junk", Reason.MALFORMED_JSON),
    "two_events_in_one_record_are_malformed": (VALID + b"\n" + VALID, Reason.MALFORMED_JSON),
    "two_comma_separated_events_are_malformed": (VALID + b"," + VALID, Reason.MALFORMED_JSON),
    "duplicate_keys_are_malformed": (VALID[:-1] + b', "amount_cents": 1}', Reason.MALFORMED_JSON),
    "json_array_is_not_an_object": ([event()], Reason.NOT_AN_OBJECT),
    "double_encoded_json_is_not_an_object": (json.dumps(json.dumps(event())), Reason.NOT_AN_OBJECT),
    "json_number_is_not_an_object": ("42", Reason.NOT_AN_OBJECT),
    "json_null_document_is_not_an_object": ("null", Reason.NOT_AN_OBJECT),
    # 2. a known event type
    "absent_event_type_is_missing": (event(event_type=ABSENT), Reason.missing("event_type")),
    "null_event_type_is_missing": (event(event_type=None), Reason.missing("event_type")),
    "numeric_event_type_is_wrong_type": (event(event_type=3), Reason.wrong_type("event_type")),
    "unknown_event_type": (event("order_cancelled"), Reason.UNKNOWN_EVENT_TYPE),
    "event_type_is_case_sensitive": (event("Order_Placed"), Reason.UNKNOWN_EVENT_TYPE),
    "unknown_event_type_beats_missing_fields": ({"event_type": "order_cancelled"}, Reason.UNKNOWN_EVENT_TYPE),
    "missing_event_type_beats_earlier_missing_field": (event(event_type=ABSENT, event_id=ABSENT),
                                                       Reason.missing("event_type")),
    # 3. required fields present and not null
    "absent_required_field_is_missing": (event(customer_id=ABSENT), Reason.missing("customer_id")),
    "json_null_required_field_is_missing": (event(merchant_id=None), Reason.missing("merchant_id")),
    "first_missing_field_in_schema_order_wins": (event(amount_cents=ABSENT, customer_id=ABSENT),
                                                 Reason.missing("customer_id")),
    "type_specific_field_is_required_for_its_type": (event(item_count=ABSENT), Reason.missing("item_count")),
    "payment_method_is_required_for_payments": (event(PAYMENT_CAPTURED, payment_method=ABSENT),
                                                Reason.missing("payment_method")),
    "missing_field_beats_negative_amount": (event(currency=ABSENT, amount_cents=-5),
                                            Reason.missing("currency")),
    "missing_field_beats_earlier_wrong_type": (event(event_id=7, currency=ABSENT),
                                               Reason.missing("currency")),
    # 4. exact JSON types
    "amount_as_json_string_is_wrong_type": (event(amount_cents="123"), Reason.wrong_type("amount_cents")),
    "amount_with_fraction_is_wrong_type": (event(amount_cents=12.5), Reason.wrong_type("amount_cents")),
    "amount_with_zero_fraction_is_wrong_type": (event(amount_cents=1250.0),
                                                Reason.wrong_type("amount_cents")),
    "amount_with_exponent_is_wrong_type": (VALID.replace(b'"amount_cents": 1250', b'"amount_cents": 1e3'),
                                           Reason.wrong_type("amount_cents")),
    "amount_beyond_long_range_is_wrong_type": (event(amount_cents=2**63), Reason.wrong_type("amount_cents")),
    "amount_as_boolean_is_wrong_type": (event(amount_cents=True), Reason.wrong_type("amount_cents")),
    "numeric_merchant_id_is_wrong_type": (event(merchant_id=42), Reason.wrong_type("merchant_id")),
    "object_merchant_id_is_wrong_type": (event(merchant_id={"id": "m"}), Reason.wrong_type("merchant_id")),
    "event_time_as_number_is_wrong_type": (event(event_time=1795461723123), Reason.wrong_type("event_time")),
    "event_time_without_an_offset_is_wrong_type": (event(event_time="2026-11-21T19:22:03.123"),
                                                   Reason.wrong_type("event_time")),
    "event_time_finer_than_microseconds_is_wrong_type": (event(event_time="2026-11-21T19:22:03.1234567Z"),
                                                         Reason.wrong_type("event_time")),
    "unparseable_event_time_is_wrong_type": (event(event_time="2026-11-21 19:22:03"),
                                             Reason.wrong_type("event_time")),
    "impossible_date_is_wrong_type": (event(event_time="2026-02-30T19:22:03.123Z"),
                                      Reason.wrong_type("event_time")),
    "schema_version_as_string_is_wrong_type": (event(schema_version="1"),
                                               Reason.wrong_type("schema_version")),
    "optional_field_of_wrong_type_is_wrong_type": (event(schema_version=2, channel=5),
                                                   Reason.wrong_type("channel")),
    "first_wrong_type_in_schema_order_wins": (event(amount_cents="x", event_time=5),
                                              Reason.wrong_type("event_time")),
    "wrong_type_beats_below_minimum": (event(event_time=5, amount_cents=-5), Reason.wrong_type("event_time")),
    "negative_fraction_is_wrong_type_not_below_minimum": (event(amount_cents=-12.5),
                                                          Reason.wrong_type("amount_cents")),
    "wrong_type_beats_unsupported_version": (event(schema_version=99, amount_cents="1"),
                                             Reason.wrong_type("amount_cents")),
    # 5. a known schema version
    "schema_version_99_is_unsupported": (event(schema_version=99), Reason.UNSUPPORTED_SCHEMA_VERSION),
    "schema_version_0_is_unsupported_before_below_minimum": (event(schema_version=0),
                                                             Reason.UNSUPPORTED_SCHEMA_VERSION),
    "unsupported_version_beats_below_minimum": (event(schema_version=99, amount_cents=-1),
                                                Reason.UNSUPPORTED_SCHEMA_VERSION),
    # 6. minimums
    "negative_amount_is_below_minimum": (event(amount_cents=-1), Reason.below_minimum("amount_cents")),
    "zero_item_count_is_below_minimum": (event(item_count=0), Reason.below_minimum("item_count")),
    "below_minimum_beats_oversized": (event(amount_cents=-1, merchant_id="m" * 65),
                                      Reason.below_minimum("amount_cents")),
    # 7. maximum lengths
    "oversized_merchant_id": (event(merchant_id="m" * 65), Reason.oversized("merchant_id")),
    "oversized_currency": (event(currency="EURO"), Reason.oversized("currency")),
    "oversized_optional_channel": (event(schema_version=2, channel="c" * 17), Reason.oversized("channel")),
    "first_oversized_field_in_schema_order_wins": (event(merchant_id="m" * 65, customer_id="c" * 65),
                                                   Reason.oversized("customer_id")),
    # valid
    "valid_v1_order_placed": (event(ORDER_PLACED), None),
    "valid_v1_payment_captured_needs_no_item_count": (event(PAYMENT_CAPTURED), None),
    "valid_v1_order_refunded": (event(ORDER_REFUNDED), None),
    "valid_v2_with_channel": (event(schema_version=2, channel="web"), None),
    "absent_optional_field_is_fine": (event(schema_version=2), None),
    "null_optional_field_is_fine": (event(schema_version=2, channel=None), None),
    "field_of_another_event_type_is_ignored": (event(ORDER_PLACED, payment_method=5), None),
    "unknown_extra_fields_are_ignored": (event(coupon="SAVE10", nested={"a": [1, 2.5]}), None),
    "zero_amount_is_at_the_minimum": (event(amount_cents=0), None),
    "merchant_id_at_max_length_is_fine": (event(merchant_id="m" * 64), None),
    "max_length_counts_characters_not_bytes": (event(merchant_id="\u00e9" * 64), None),
    "whitespace_around_the_object_is_fine": (b"  " + VALID + b"\n", None),
}


@pytest.fixture(scope="module")
def observed_reasons(spark) -> dict[str, str | None]:
    """Every reason case parsed in one DataFrame, so the whole table costs one Spark job."""
    names = list(REASON_CASES)
    parsed = parse(spark, [REASON_CASES[name][0] for name in names])
    return dict(zip(names, column_in_offset_order(parsed, "dead_letter_reason"), strict=True))


@pytest.mark.parametrize("case", list(REASON_CASES))
def test_first_failing_check_names_the_reason(case, observed_reasons):
    assert observed_reasons[case] == REASON_CASES[case][1]


def test_valid_events_of_each_type_and_version_get_typed_columns_and_no_reason(spark):
    values = [event(ORDER_PLACED, payment_method="ignored"), event(PAYMENT_CAPTURED, event_id="ev-2"),
              event(ORDER_REFUNDED, event_id="ev-3"), event(event_id="ev-4", schema_version=2, channel="app")]
    parsed = parse(spark, values).select(*event_columns(SCHEMA), "dead_letter_reason")
    common = ("ord-1", "cust-1", "merch-1", 1250, "EUR")
    expected = spark.createDataFrame([
        ("ev-1", ORDER_PLACED, EVENT_INSTANT, 1, *common, 2, None, None, None, None),
        ("ev-2", PAYMENT_CAPTURED, EVENT_INSTANT, 1, *common, None, "card", None, None, None),
        ("ev-3", ORDER_REFUNDED, EVENT_INSTANT, 1, *common, None, None, "damaged", None, None),
        ("ev-4", ORDER_PLACED, EVENT_INSTANT, 2, *common, 2, None, None, "app", None),
    ], parsed.schema)
    assertDataFrameEqual(parsed, expected)


def test_output_has_coordinates_typed_fields_reason_and_fingerprint(spark):
    parsed = parse(spark, [])
    types = {field.name: field.dataType for field in parsed.schema}
    kinds = {"string": StringType(), "long": LongType(), "timestamp": TimestampType()}  # the marketplace's kinds
    assert parsed.columns == ["topic", "partition", "offset", "log_append_time", "key", "value",
                              *event_columns(SCHEMA), "dead_letter_reason", "payload_fingerprint"]
    assert [types[spec.name] for spec in SCHEMA.fields] == [kinds[spec.kind] for spec in SCHEMA.fields]
    assert (types["partition"], types["offset"], types["key"]) == (IntegerType(), LongType(), BinaryType())
    assert types["log_append_time"] == TimestampType()
    assert types["dead_letter_reason"] == types["payload_fingerprint"] == StringType()


def test_event_columns_are_the_field_names_in_schema_order():
    assert event_columns(SCHEMA) == ["event_id", "event_type", "event_time", "schema_version", "order_id",
                                     "customer_id", "merchant_id", "amount_cents", "currency", "item_count",
                                     "payment_method", "refund_reason", "channel"]


def test_every_record_keeps_its_coordinates_and_no_row_is_dropped_or_duplicated(spark):
    rows = [(b"k1", VALID, "events", 0, 7, APPENDED, 1, "extra"),
            (None, b"{not json", "events", 1, 7, APPENDED, 1, "extra"),
            (b"k3", None, "events", 2, 0, APPENDED, 1, "extra"),
            (b"k1", VALID, "events", 0, 8, APPENDED, 1, "extra")]
    raw = spark.createDataFrame(rows, RAW_COLUMNS + ", headers string")
    parsed = parse_records(raw, SCHEMA)
    assert parsed.count() == raw.count()
    appended = F.col("timestamp").alias("log_append_time")
    kafka_coordinates = raw.select("topic", "partition", "offset", appended, "key", "value")
    assertDataFrameEqual(parsed.select(*kafka_coordinates.columns), kafka_coordinates)


def test_valid_events_and_dead_letters_split_the_records(spark):
    parsed = parse(spark, [VALID, b"[1]", event(amount_cents=-1)])
    assert column_in_offset_order(valid_events(parsed), "offset") == [0]
    letters = dead_letters(parsed)
    assert letters.columns == ["topic", "partition", "offset", "log_append_time", "key", "value", "reason"]
    negative = encode(event(amount_cents=-1))
    expected = spark.createDataFrame(
        [("events", 0, 1, APPENDED, b"ord-1", b"[1]", Reason.NOT_AN_OBJECT),
         ("events", 0, 2, APPENDED, b"ord-1", negative, Reason.below_minimum("amount_cents"))],
        letters.schema)
    assertDataFrameEqual(letters, expected)


def test_fingerprint_is_equal_for_equal_content_and_differs_for_any_changed_value(spark):
    reordered = dict(reversed(list(event().items())))
    values = [VALID, VALID, json.dumps(reordered, indent=2), event(amount_cents=1251),
              event(event_time="2026-11-21T19:22:03.124Z"),
              event(customer_id="cust-1m", merchant_id="erch-1"),
              event(schema_version=2), event(schema_version=2, channel=None), b"[1]"]
    original, resent, reordered_fp, amount, time, shifted, v2, v2_null_channel, invalid = \
        column_in_offset_order(parse(spark, values), "payload_fingerprint")
    assert len(original) == 64 and int(original, 16) >= 0
    assert original == resent == reordered_fp
    assert len({original, amount, time, shifted, v2}) == 5
    assert v2 == v2_null_channel
    assert invalid is None


@pytest.mark.parametrize("split", [lambda parsed: parsed, valid_events, dead_letters],
                         ids=["parse_records", "valid_events", "dead_letters"])
def test_each_record_is_parsed_once_without_python_udfs(spark, capsys, split):
    split(parse(spark, [VALID])).explain(mode="formatted")
    plan = capsys.readouterr().out
    assert plan.count("parseJson") == 1
    assert "EvalPython" not in plan and "PythonUDF" not in plan


DEPTH = "probe.depth_cm"
TAG = 'owner\'s "tag"'
SENSOR = EventSchema(
    fields=(
        FieldSpec("reading_id", "string", max_length=16),
        FieldSpec("kind", "string"),
        FieldSpec("taken_at", "timestamp"),
        FieldSpec("format", "long"),
        FieldSpec("device_id", "string", max_length=8),
        FieldSpec("reading", "long", min_value=0),
        FieldSpec(DEPTH, "long", event_types=("soil",), min_value=0),
        FieldSpec(TAG, "string", required=False),
    ),
    event_types=("air", "soil"),
    versions=(3,),
    id_field="reading_id", type_field="kind", time_field="taken_at", version_field="format",
)


def sensor(kind: str = "air", **changes: Any) -> dict[str, Any]:
    """A valid reading of a schema unlike the marketplace's, with names needing quotes in JSON paths."""
    payload = {"reading_id": "r-1", "kind": kind, "taken_at": EVENT_TIME, "format": 3, "device_id": "dev-1",
               "reading": 21, **({DEPTH: 30} if kind == "soil" else {}), **changes}
    return {name: value for name, value in payload.items() if value is not ABSENT}


def test_any_event_schema_works_with_its_own_field_names(spark):
    values = [sensor("air", **{TAG: "roof"}), sensor("soil"), sensor("soil", **{DEPTH: ABSENT}),
              sensor(reading="12"), sensor(kind=ABSENT), sensor(format=1), sensor(device_id="device-0042"),
              sensor("soil", **{DEPTH: -3}), sensor(event_type="air", kind="water")]
    parsed = parse(spark, values, SENSOR)
    assert column_in_offset_order(parsed, "dead_letter_reason") == [
        None, None, Reason.missing(DEPTH), Reason.wrong_type("reading"), Reason.missing("kind"),
        Reason.UNSUPPORTED_SCHEMA_VERSION, Reason.oversized("device_id"), Reason.below_minimum(DEPTH),
        Reason.UNKNOWN_EVENT_TYPE]
    typed = valid_events(parsed).select(*[F.col(f"`{name}`") for name in event_columns(SENSOR)])
    expected = spark.createDataFrame([("r-1", "air", EVENT_INSTANT, 3, "dev-1", 21, None, "roof"),
                                      ("r-1", "soil", EVENT_INSTANT, 3, "dev-1", 21, 30, None)], typed.schema)
    assertDataFrameEqual(typed, expected)


@pytest.mark.parametrize("name", ["offset", "Dead_Letter_Reason", "payload_fingerprint", "Reading", ""])
def test_field_names_that_clash_with_another_column_are_refused(spark, name):
    schema = replace(SENSOR, fields=(*SENSOR.fields, FieldSpec(name, "string")))
    with pytest.raises(ValueError, match="clashes"):
        parse(spark, [], schema)
