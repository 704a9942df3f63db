"""The event generator: deterministic, realistic, and its manifest is the truth about every record.

The malformed-record checks use a small reference validator written here from VALIDATION_ORDER_DOC,
independent of the generator's internals, so a generator that mislabels a defect cannot pass.
"""

from __future__ import annotations

import collections
import itertools
import json
import re
from datetime import datetime

import pytest

from spark_apps.marketplace.events import (
    EVENT_TYPES,
    ORDER_PLACED,
    ORDER_REFUNDED,
    PAYMENT_CAPTURED,
    SCHEMA_VERSIONS,
    Reason,
    fields_for,
)
from spark_apps.marketplace.generator import (
    KINDS,
    GeneratedRecord,
    GeneratorConfig,
    Manifest,
    generate,
    nominal_time_ms,
)

CONFIG = GeneratorConfig(seed=7, total_events=10_000)
ISO_UTC_MILLIS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
ON_TIME_KINDS = ("valid", "duplicate", "conflict")


@pytest.fixture(scope="module")
def records() -> list[GeneratedRecord]:
    return list(generate(CONFIG))


@pytest.fixture(scope="module")
def manifest(records: list[GeneratedRecord]) -> Manifest:
    return Manifest.from_records(CONFIG, records)


@pytest.fixture(scope="module")
def events(records: list[GeneratedRecord]) -> dict[int, dict]:
    """The parsed JSON of every record that is not malformed, by seq."""
    return {r.seq: json.loads(r.value) for r in records if r.kind != "malformed"}


def epoch_ms(iso: str) -> int:
    return round(datetime.fromisoformat(iso).timestamp() * 1000)


def has_type(kind: str, value: object) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "long":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, str) and ISO_UTC_MILLIS.fullmatch(value) is not None


def reference_reason(value: bytes) -> str | None:
    """The dead-letter reason VALIDATION_ORDER_DOC gives this value, or None if it is a valid event."""
    try:
        event = json.loads(value)
    except ValueError:
        return Reason.MALFORMED_JSON
    if not isinstance(event, dict):
        return Reason.NOT_AN_OBJECT
    event_type = event.get("event_type")
    if event_type is None:
        return Reason.missing("event_type")
    if not isinstance(event_type, str):
        return Reason.wrong_type("event_type")
    if event_type not in EVENT_TYPES:
        return Reason.UNKNOWN_EVENT_TYPE
    specs = fields_for(event_type)
    present = [spec for spec in specs if event.get(spec.name) is not None]
    for spec in specs:
        if spec.required and spec not in present:
            return Reason.missing(spec.name)
    for spec in present:
        if not has_type(spec.kind, event[spec.name]):
            return Reason.wrong_type(spec.name)
    if event["schema_version"] not in SCHEMA_VERSIONS:
        return Reason.UNSUPPORTED_SCHEMA_VERSION
    for spec in present:
        if spec.min_value is not None and event[spec.name] < spec.min_value:
            return Reason.below_minimum(spec.name)
    for spec in present:
        if spec.max_length is not None and len(event[spec.name]) > spec.max_length:
            return Reason.oversized(spec.name)
    return None


def by_kind(records: list[GeneratedRecord], kind: str) -> list[GeneratedRecord]:
    return [r for r in records if r.kind == kind]


def test_same_seed_gives_byte_identical_records(records):
    again = list(generate(CONFIG))
    assert [(r.key, r.value, r.kind) for r in again] == [(r.key, r.value, r.kind) for r in records]


def test_different_seed_gives_different_records(records):
    other = list(generate(GeneratorConfig(seed=8, total_events=2_000)))
    assert [r.value for r in other] != [r.value for r in records[:2_000]]


def test_runs_at_different_start_times_do_not_share_event_ids():
    first = {r.event_id for r in generate(GeneratorConfig(total_events=500))}
    later = {r.event_id for r in generate(GeneratorConfig(total_events=500, base_time_ms=1_767_312_000_000))}
    assert not (first - {None}) & later


def test_every_kind_appears_near_its_configured_rate(records):
    counts = collections.Counter(r.kind for r in records)
    expected = {"late": CONFIG.late_rate, "duplicate": CONFIG.duplicate_rate,
                "conflict": CONFIG.conflict_rate, "malformed": CONFIG.malformed_rate}
    for kind, rate in expected.items():
        assert 0.6 * rate * len(records) <= counts[kind] <= 1.4 * rate * len(records), (kind, counts)
    assert counts["valid"] > 0.9 * len(records)
    assert [r.seq for r in records] == list(range(CONFIG.total_events))


def test_manifest_accounts_for_every_record(records, manifest):
    accounted = (len(manifest.valid_events) + len(manifest.late_events) + len(manifest.duplicates)
                 + len(manifest.conflicts) + len(manifest.malformed))
    assert accounted == manifest.total_records == len(records)
    assert manifest.counts_by_kind == dict(collections.Counter({k: 0 for k in KINDS})
                                           | collections.Counter(r.kind for r in records))
    assert [row["seq"] for row in manifest.records] == list(range(len(records)))


def test_malformed_records_fail_with_exactly_the_expected_reason(records):
    malformed = by_kind(records, "malformed")
    assert [(r.seq, reference_reason(r.value)) for r in malformed] == \
        [(r.seq, r.expected_reason) for r in malformed]
    reasons = {r.expected_reason for r in malformed}
    fixed = {Reason.MALFORMED_JSON, Reason.NOT_AN_OBJECT, Reason.UNKNOWN_EVENT_TYPE,
             Reason.UNSUPPORTED_SCHEMA_VERSION}
    assert fixed <= reasons
    for prefix in ("missing_field:", "wrong_type:", "below_minimum:", "oversized_value:"):
        assert any(reason.startswith(prefix) for reason in reasons), prefix


def test_malformed_records_expose_only_readable_fresh_event_ids(records, manifest):
    for record in by_kind(records, "malformed"):
        try:
            event = json.loads(record.value)
        except ValueError:
            event = None
        readable = event.get("event_id") if isinstance(event, dict) else None
        assert record.event_id == (readable if isinstance(readable, str) else None)
        assert record.event_id not in manifest.valid_events
        assert record.event_id not in manifest.late_events


def test_every_other_record_passes_the_reference_validator(records):
    verdicts = [(r.seq, r.kind, reference_reason(r.value)) for r in records if r.kind != "malformed"]
    assert [verdict for verdict in verdicts if verdict[2] is not None] == []


def test_event_json_is_compact_in_schema_order_with_realistic_values(records, events):
    methods, v2_seen = set(), False
    for record in records:
        if record.kind == "malformed":
            continue
        event = events[record.seq]
        assert record.value == json.dumps(event, separators=(",", ":")).encode()
        version = event["schema_version"]
        expected = [s.name for s in fields_for(event["event_type"]) if s.since_version <= version]
        assert list(event) == expected
        v2_seen |= version == 2
        assert re.fullmatch(r"[A-Z]{3}", event["currency"]) and event["amount_cents"] >= 0
        if event["event_type"] == PAYMENT_CAPTURED:
            methods.add(event["payment_method"])
        if event["event_type"] == ORDER_PLACED:
            assert event["item_count"] >= 1
    assert v2_seen and methods == {"card", "wallet", "bank_transfer"}


def test_every_record_is_keyed_by_its_order_id(records, events):
    for record in records:
        if record.kind == "malformed":
            assert record.key == b"malformed" or record.key.startswith(b"ord-")
        else:
            assert record.key == events[record.seq]["order_id"].encode()
            assert record.event_id == events[record.seq]["event_id"]


def test_duplicates_are_byte_identical_resends_of_an_earlier_valid_record(records):
    first = {}
    distances = []
    for record in records:
        if record.kind == "valid":
            first[record.event_id] = record
        elif record.kind == "duplicate":
            original = first[record.event_id]
            assert (original.key, original.value) == (record.key, record.value)
            distances.append(record.seq - original.seq)
    assert min(distances) <= 3 and max(distances) >= 100


def test_conflicts_share_event_id_and_key_with_an_earlier_valid_record_but_differ(records, manifest):
    first = {}
    for record in records:
        if record.kind == "valid":
            first[record.event_id] = record
        elif record.kind == "conflict":
            original = first[record.event_id]
            assert original.key == record.key and original.value != record.value
    assert manifest.conflicts and all(first[c["event_id"]].seq < c["seq"] for c in manifest.conflicts)


def test_orders_are_followed_by_a_matching_payment_and_at_most_a_full_refund(records, events):
    orders, payments, refunds = {}, {}, []
    for record in by_kind(records, "valid"):
        event = events[record.seq]
        if event["event_type"] == ORDER_PLACED:
            orders[event["order_id"]] = event
        elif event["event_type"] == PAYMENT_CAPTURED:
            payments[event["order_id"]] = event
        else:
            refunds.append(event)
    assert len(payments) >= 0.95 * len(orders) and set(payments) <= set(orders)
    for order_id, payment in payments.items():
        order = orders[order_id]
        for name in ("customer_id", "merchant_id", "amount_cents", "currency"):
            assert payment[name] == order[name]
        assert epoch_ms(payment["event_time"]) > epoch_ms(order["event_time"])
    assert 0.05 * len(orders) < len(refunds) < 0.15 * len(orders)
    for refund in refunds:
        payment = payments[refund["order_id"]]
        assert refund["amount_cents"] <= payment["amount_cents"]
        assert epoch_ms(refund["event_time"]) > epoch_ms(payment["event_time"])


def test_some_payments_precede_their_order_on_the_same_key(records, events):
    order_seq = {events[r.seq]["order_id"]: r.seq for r in by_kind(records, "valid")
                 if events[r.seq]["event_type"] == ORDER_PLACED}
    orphans = [r for r in by_kind(records, "valid") if events[r.seq]["event_type"] == PAYMENT_CAPTURED
               and r.seq < order_seq[events[r.seq]["order_id"]]]
    assert len(orphans) > 0.005 * len(order_seq)
    for payment in orphans:
        order = records[order_seq[events[payment.seq]["order_id"]]]
        assert order.key == payment.key
        assert epoch_ms(events[payment.seq]["event_time"]) > epoch_ms(events[order.seq]["event_time"])


def test_late_events_are_beyond_allowed_lateness_at_base_time(records, events, manifest):
    late = by_kind(records, "late")
    assert {events[r.seq]["event_type"] for r in late} == set(EVENT_TYPES)
    for record in late:
        lag = CONFIG.base_time_ms - epoch_ms(events[record.seq]["event_time"])
        assert lag > CONFIG.allowed_lateness_s * 1000
    assert set(manifest.late_events) == {r.event_id for r in late}


def test_on_time_events_stay_within_max_disorder_of_their_nominal_time(records, events):
    shifted = 0
    for record in records:
        if record.kind in ON_TIME_KINDS:
            nominal = nominal_time_ms(CONFIG, record.seq)
            event_time = epoch_ms(events[record.seq]["event_time"])
            assert event_time >= nominal - CONFIG.max_disorder_ms
            shifted += event_time < nominal - 1000
    assert shifted > 0.01 * len(records)


def test_merchants_and_customers_are_skewed(records, events):
    orders = [events[r.seq] for r in by_kind(records, "valid") if events[r.seq]["event_type"] == ORDER_PLACED]
    merchants = collections.Counter(o["merchant_id"] for o in orders)
    customers = collections.Counter(o["customer_id"] for o in orders)
    assert merchants.most_common(1)[0][1] > 5 * len(orders) / CONFIG.merchants
    assert customers.most_common(1)[0][1] > 20 * len(orders) / CONFIG.customers


def test_customers_act_in_sessions_separated_by_more_than_the_gap():
    config = GeneratorConfig(total_events=6_000, events_per_second=20, session_gap_s=30, customers=300,
                             late_rate=0, duplicate_rate=0, conflict_rate=0, malformed_rate=0)
    times = collections.defaultdict(list)
    for record in generate(config):
        event = json.loads(record.value)
        if event["event_type"] == ORDER_PLACED:
            times[event["customer_id"]].append(epoch_ms(event["event_time"]))
    gap_ms = config.session_gap_s * 1000
    sessions, busy_sessions = 0, 0
    for stamps in times.values():
        stamps.sort()
        splits = [i for i in range(1, len(stamps)) if stamps[i] - stamps[i - 1] > gap_ms]
        bounds = [0, *splits, len(stamps)]
        sessions += len(bounds) - 1
        busy_sessions += sum(1 for start, end in itertools.pairwise(bounds) if end - start >= 2)
    assert sessions > 1.5 * len(times)
    assert busy_sessions > 0.2 * sessions


def test_manifest_json_round_trip(manifest, tmp_path):
    path = tmp_path / "manifest.json"
    manifest.to_json(path)
    restored = Manifest.from_json(path)
    assert restored == manifest
    restored.to_json(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()


def test_manifest_rejects_a_duplicate_whose_bytes_differ(records):
    original = by_kind(records, "valid")[0]
    forged = GeneratedRecord(len(records), original.key, original.value + b" ", "duplicate",
                             original.event_id, None)
    with pytest.raises(ValueError, match="contradict"):
        Manifest.from_records(CONFIG, [original, forged])


def test_refund_events_exist_in_short_runs():
    kinds = {json.loads(r.value)["event_type"] for r in generate(GeneratorConfig(total_events=3_000))
             if r.kind == "valid"}
    assert ORDER_REFUNDED in kinds


@pytest.mark.parametrize(("overrides", "field"), [
    ({"late_rate": 1.5}, "late_rate"),
    ({"refund_rate": -0.1}, "refund_rate"),
    ({"duplicate_rate": 0.3, "malformed_rate": 0.3}, "duplicate_rate"),
    ({"customers": 0}, "customers"),
    ({"events_per_second": 0}, "events_per_second"),
    ({"max_disorder_ms": 900_000}, "max_disorder_ms"),
])
def test_config_rejects_invalid_values_naming_the_field(overrides, field):
    with pytest.raises(ValueError, match=field) as error:
        GeneratorConfig(**overrides)
    assert "\n" not in str(error.value)
