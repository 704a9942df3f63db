"""The field kinds a real data set needs: double, decimal(p, s), boolean, date, and timestamps in any
ISO-8601 offset or as epoch milliseconds; each refused value names its field."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql.types import BooleanType, DateType, DecimalType, DoubleType, TimestampType

from spark_apps.pipeline.event_schema import EventSchema, FieldSpec, Reason
from spark_apps.transforms.parsing import parse_records

pytestmark = pytest.mark.integration

APPENDED = datetime(2026, 11, 21, 19, 22, 5, tzinfo=UTC)
TRIP = EventSchema(
    fields=(FieldSpec("trip_id", "string"), FieldSpec("kind", "string"), FieldSpec("picked_up_at", "timestamp"),
            FieldSpec("version", "long"), FieldSpec("distance_km", "double", min_value=0),
            FieldSpec("fare", "decimal", precision=8, scale=2, min_value=0), FieldSpec("shared", "boolean"),
            FieldSpec("service_day", "date"), FieldSpec("dropped_off_ms", "timestamp", epoch_millis=True)),
    event_types=("trip",), id_field="trip_id", type_field="kind", time_field="picked_up_at", version_field="version")


def trip(**changes: Any) -> str:
    payload = {"trip_id": "t-1", "kind": "trip", "picked_up_at": "2026-11-21T19:22:03Z", "version": 1,
               "distance_km": 3.25, "fare": 12.5, "shared": False, "service_day": "2026-11-21",
               "dropped_off_ms": 1795289000000, **changes}
    return json.dumps(payload)


def parsed_rows(spark, values: list[str]) -> list:
    rows = [(b"t", value.encode(), "trips", 0, offset, APPENDED, 1) for offset, value in enumerate(values)]
    raw = spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset long, "
                                      "timestamp timestamp, timestampType int")
    return sorted(parse_records(raw, TRIP).collect(), key=lambda row: row.offset)


def test_each_kind_gets_its_spark_type(spark):
    raw = spark.createDataFrame([], "key binary, value binary, topic string, partition int, offset long, "
                                    "timestamp timestamp, timestampType int")
    types = {f.name: f.dataType for f in parse_records(raw, TRIP).schema}
    assert (types["distance_km"], types["fare"], types["shared"], types["service_day"], types["dropped_off_ms"]) \
        == (DoubleType(), DecimalType(8, 2), BooleanType(), DateType(), TimestampType())


def test_valid_values_of_every_kind_are_typed_exactly(spark):
    row = parsed_rows(spark, [trip(fare=1234.05, distance_km=7)])[0]
    assert row.dead_letter_reason is None
    assert (row.distance_km, row.fare, row.shared, row.service_day) == (7.0, Decimal("1234.05"), False,
                                                                        date(2026, 11, 21))
    assert row.picked_up_at.astimezone(UTC) == datetime(2026, 11, 21, 19, 22, 3, tzinfo=UTC)
    assert row.dropped_off_ms.astimezone(UTC) == datetime.fromtimestamp(1795289000, UTC)


@pytest.mark.parametrize(("text", "instant"), [
    ("2026-11-21T19:22:03Z", datetime(2026, 11, 21, 19, 22, 3, tzinfo=UTC)),
    ("2026-11-21T19:22:03.5Z", datetime(2026, 11, 21, 19, 22, 3, 500000, tzinfo=UTC)),
    ("2026-11-21T21:22:03.123+02:00", datetime(2026, 11, 21, 19, 22, 3, 123000, tzinfo=UTC)),
    ("2026-11-21T21:22:03+0200", datetime(2026, 11, 21, 19, 22, 3, tzinfo=UTC)),
    ("2026-11-21T13:52:03.123456-05:30", datetime(2026, 11, 21, 19, 22, 3, 123456, tzinfo=UTC)),
    ("2026-11-21T21:22:03+02", datetime(2026, 11, 21, 19, 22, 3, tzinfo=UTC)),
])
def test_iso_timestamps_with_or_without_a_fraction_and_with_any_offset_are_the_same_instant(spark, text, instant):
    row = parsed_rows(spark, [trip(picked_up_at=text)])[0]
    assert row.dead_letter_reason is None and row.picked_up_at.astimezone(UTC) == instant


def test_the_instant_does_not_depend_on_the_session_time_zone(spark):
    values = [trip(picked_up_at="2026-11-21T21:22:03.123+02:00")]
    before = parsed_rows(spark, values)[0].payload_fingerprint
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        assert parsed_rows(spark, values)[0].payload_fingerprint == before
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


REFUSED = {
    "double_as_a_string": (trip(distance_km="3.25"), Reason.wrong_type("distance_km")),
    "negative_double": (trip(distance_km=-0.5), Reason.below_minimum("distance_km")),
    "decimal_with_more_digits_after_the_point_than_its_scale": (trip(fare=12.345), Reason.wrong_type("fare")),
    "decimal_too_large_for_its_precision": (trip(fare=1234567.5), Reason.wrong_type("fare")),
    "decimal_in_exponent_notation": (trip().replace('"fare": 12.5', '"fare": 1.25e1'), Reason.wrong_type("fare")),
    "negative_decimal": (trip(fare=-1), Reason.below_minimum("fare")),
    "boolean_as_a_number": (trip(shared=1), Reason.wrong_type("shared")),
    "boolean_as_a_string": (trip(shared="true"), Reason.wrong_type("shared")),
    "date_with_a_time": (trip(service_day="2026-11-21T00:00:00Z"), Reason.wrong_type("service_day")),
    "impossible_date": (trip(service_day="2026-02-30"), Reason.wrong_type("service_day")),
    "date_without_zero_padding": (trip(service_day="2026-1-5"), Reason.wrong_type("service_day")),
    "timestamp_without_an_offset": (trip(picked_up_at="2026-11-21T19:22:03"), Reason.wrong_type("picked_up_at")),
    "timestamp_with_a_space": (trip(picked_up_at="2026-11-21 19:22:03Z"), Reason.wrong_type("picked_up_at")),
    "epoch_millis_as_a_string": (trip(dropped_off_ms="1795289000000"), Reason.wrong_type("dropped_off_ms")),
    "epoch_millis_with_a_fraction": (trip(dropped_off_ms=1795289000000.5), Reason.wrong_type("dropped_off_ms")),
}


def test_refused_values_go_to_dead_letters_naming_their_field(spark):
    values = [value for value, _ in REFUSED.values()]
    reasons = [row.dead_letter_reason for row in parsed_rows(spark, values)]
    assert dict(zip(REFUSED, reasons, strict=True)) == {case: reason for case, (_, reason) in REFUSED.items()}


@pytest.mark.parametrize(("spec", "message"), [
    (dict(kind="decimal"), "needs 0 <= scale <= precision <= 38"),
    (dict(kind="decimal", precision=4, scale=5), "needs 0 <= scale <= precision <= 38"),
    (dict(kind="long", precision=4, scale=2), "precision and scale belong to decimal fields only"),
    (dict(kind="string", epoch_millis=True), "epoch_millis belongs to timestamp fields only"),
    (dict(kind="boolean", min_value=0), "min_value belongs to number fields only"),
    (dict(kind="double", max_length=3), "max_length belongs to string fields only"),
    (dict(kind="float"), "unknown kind 'float'"),
])
def test_a_field_declaration_that_cannot_be_checked_is_refused(spec, message):
    with pytest.raises(ValueError, match=message):
        FieldSpec("x", **spec)
