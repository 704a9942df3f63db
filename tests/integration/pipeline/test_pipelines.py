"""Declared pipelines through the real stream: seed 003's FULL OUTER JOIN, a session merge, a test-only pipeline.

Each test streams a handful of events, one micro-batch at a time where the order matters, and checks
the final gold table and its change feed: the retractions (update pre-images, deletes) a downstream
consumer sees. The marketplace tests run a pipeline of only the table under test, to keep
each micro-batch short; ``test_stream`` runs all three marketplace tables together.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid
from collections import defaultdict
from decimal import Decimal

import pytest

from spark_apps.audit.auditor import audit
from spark_apps.audit.recompute import stream_tables
from spark_apps.io import stream_store
from spark_apps.io.catalog import table_path
from spark_apps.marketplace.events import ORDER_PLACED, PAYMENT_CAPTURED, SCHEMA
from spark_apps.marketplace.pipeline import CUSTOMER_SESSIONS, ORDER_STATUS, SESSION_GAP_S
from spark_apps.pipeline.declaration import Pipeline, load_pipeline
from spark_apps.pipeline.lateness import HIGH_WATER_MARK, Lateness, LatenessRule
from spark_apps.stream.job import StreamFailed, StreamJob
from spark_apps.target.resolution import target_of
from spark_apps.transforms.events import lateness_flag
from tests.support.expected import UTC, as_utc
from tests.support.records import iso, send, sensor_reading
from tests.support.streams import read_stream_table

pytestmark = pytest.mark.integration

# Within one commit a pre-image comes before its post-image.
CHANGE_RANK = {"update_preimage": 0, "update_postimage": 1, "insert": 2, "delete": 3}
DETAILS = {ORDER_PLACED: {"item_count": 1}, PAYMENT_CAPTURED: {"payment_method": "card"}}


def now_ms() -> dt.datetime:
    moment = dt.datetime.now(UTC)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def marketplace_event(event_type: str, order_id: str, at: dt.datetime, amount: int, customer: str = "c1") -> dict:
    return {"event_id": f"{event_type}-{order_id}", "event_type": event_type, "event_time": iso(at),
            "schema_version": 1, "order_id": order_id, "customer_id": customer, "merchant_id": "m1",
            "amount_cents": amount, "currency": "EUR", **DETAILS[event_type]}


def stream_settings(make_topic, settings, tmp_path, topic: str, partitions: int, **overrides):
    make_topic(topic, partitions)
    return settings.with_overrides(events_topic=topic, warehouse_dir=tmp_path / "warehouse",
                                   checkpoint_root=tmp_path / "checkpoints", **overrides)


def change_feed(spark, job: StreamJob, name: str, keys: tuple[str, ...], values: tuple[str, ...]) -> list[list[tuple]]:
    """The changes of a gold view since its store was created, one list per commit in commit order; each row is
    (change type, *keys, *values), timestamps in UTC."""
    latest = stream_store.latest_version(job.settings, job.target)
    feed = stream_store.changes(spark, job.settings, job.target, name, keys, 0, latest).collect()
    commits: dict[int, list] = defaultdict(list)
    for row in feed:
        commits[row["_commit_version"]].append(row)
    utc = lambda value: as_utc(value) if isinstance(value, dt.datetime) else value  # noqa: E731
    return [[(row["_change_type"], *[utc(row[c]) for c in (*keys, *values)])
             for row in sorted(rows, key=lambda r: (tuple(r[k] for k in keys), CHANGE_RANK[r["_change_type"]]))]
            for _, rows in sorted(commits.items())]


def test_seed_003_full_outer_join_retracts_orphans_as_their_partners_arrive(spark, settings, make_topic, tmp_path):
    """Seed 003's Left/Right example: Left = order_placed, Right = payment_captured, Num = order_id,
    fed in the seed's arrival order, one event per micro-batch."""
    topic = f"test.seed003.{uuid.uuid4().hex[:8]}"
    config = stream_settings(make_topic, settings, tmp_path, topic, partitions=1, max_offsets_per_trigger=1)
    start = now_ms() - dt.timedelta(minutes=10)
    at = {minute: start + dt.timedelta(minutes=minute) for minute in range(1, 7)}  # the seed's 12:01 .. 12:06
    arrivals = [(PAYMENT_CAPTURED, 2, 1), (ORDER_PLACED, 1, 2), (ORDER_PLACED, 3, 3),
                (PAYMENT_CAPTURED, 3, 4), (PAYMENT_CAPTURED, 4, 5), (ORDER_PLACED, 2, 6)]
    send(config, topic, [(str(num), json.dumps(marketplace_event(side, str(num), at[minute], num * 1000)).encode())
                         for side, num, minute in arrivals])

    pipeline = Pipeline(name="seed003", schema=SCHEMA, gold_tables=(ORDER_STATUS,))
    job = StreamJob(spark, config, target_of(config, pipeline))
    job.run(until_caught_up=True)
    assert len(job.stats) == 6, "one micro-batch per event"

    name = job.tables.gold("order_status")
    final = {r.order_id: (r.order_amount_cents, as_utc(r.placed_at) if r.placed_at else None, r.paid_cents,
                          as_utc(r.paid_at) if r.paid_at else None, r.status)
             for r in read_stream_table(spark, config, name, job.pipeline).collect()}
    assert final == {"1": (1000, at[2], 0, None, "placed"),                  # (L1, null)
                     "2": (2000, at[6], 2000, at[1], "paid"),                # (L2, R2)
                     "3": (3000, at[3], 3000, at[4], "paid"),                # (L3, R3)
                     "4": (None, None, 4000, at[5], "orphan_payment")}       # (null, R4)

    columns = ("order_amount_cents", "paid_cents", "status")
    assert change_feed(spark, job, name, ("order_id",), columns) == [
        [("insert", "2", None, 2000, "orphan_payment")],                     # 12:01 +(null, R2)
        [("insert", "1", 1000, 0, "placed")],                                # 12:02 +(L1, null)
        [("insert", "3", 3000, 0, "placed")],                                # 12:03 +(L3, null)
        [("update_preimage", "3", 3000, 0, "placed"),                        # 12:04 undo (L3, null)
         ("update_postimage", "3", 3000, 3000, "paid")],                     #       +(L3, R3)
        [("insert", "4", None, 4000, "orphan_payment")],                     # 12:05 +(null, R4)
        [("update_preimage", "2", None, 2000, "orphan_payment"),             # 12:06 undo (null, R2)
         ("update_postimage", "2", 2000, 2000, "paid")],                     #       +(L2, R2)
    ]


def test_an_on_time_event_that_bridges_two_sessions_merges_them(spark, settings, make_topic, tmp_path):
    topic = f"test.sessions.{uuid.uuid4().hex[:8]}"
    config = stream_settings(make_topic, settings, tmp_path, topic, partitions=1, max_offsets_per_trigger=2)
    gap = dt.timedelta(seconds=SESSION_GAP_S)
    first = now_ms() - dt.timedelta(minutes=10)
    second, bridge = first + gap + dt.timedelta(seconds=60), first + gap / 2 + dt.timedelta(seconds=30)
    events = [marketplace_event(ORDER_PLACED, "o1", first, 100, customer="c7"),
              marketplace_event(ORDER_PLACED, "o2", second, 200, customer="c7"),
              marketplace_event(PAYMENT_CAPTURED, "o1", bridge, 100, customer="c7")]
    send(config, topic, [(e["order_id"], json.dumps(e).encode()) for e in events])

    pipeline = Pipeline(name="sessions", schema=SCHEMA, gold_tables=(CUSTOMER_SESSIONS,))
    job = StreamJob(spark, config, target_of(config, pipeline))
    job.run(until_caught_up=True)
    assert len(job.stats) == 2, "the two sessions in one micro-batch, the bridging event in the next"

    name = job.tables.gold("customer_sessions")
    final = [(r.customer_id, as_utc(r.session_start), as_utc(r.session_end), r.duration_ms, r.events, r.orders,
              r.payments) for r in read_stream_table(spark, config, name, job.pipeline).collect()]
    assert final == [("c7", first, second, (second - first) // dt.timedelta(milliseconds=1), 3, 2, 1)]

    assert change_feed(spark, job, name, ("customer_id", "session_start"), ("session_end", "events")) == [
        [("insert", "c7", first, first, 1), ("insert", "c7", second, second, 1)],
        [("update_preimage", "c7", first, first, 1),     # the earlier session is retracted and grows,
         ("update_postimage", "c7", first, second, 3),
         ("delete", "c7", second, second, 1)],           # the later one is retracted for good
    ]


def test_a_winner_displaced_from_a_session_splits_it_while_added_events_extend_the_stored_sessions(
        spark, settings, make_topic, tmp_path):
    """Batch 0: c8's orders at t, t+200 s and t+400 s (one session) and c9's at t, all on partition 1. Batch 1: the
    t+200 s order's event again on partition 0, earlier in the log and dated t+600 s, so it takes the id; and a c9
    order at t+100 s. c9's stored session is extended by its added event (a partial row the view folds in). c8's
    lost its middle event, which splits its session; only recomputing c8 from its events gives that (a reset of
    c8's rows), and the batch recompute must agree."""
    from spark_apps.io.producer import make_producer

    topic = f"test.sessions.{uuid.uuid4().hex[:8]}"
    config = stream_settings(make_topic, settings, tmp_path, topic, partitions=2)
    t = now_ms() - dt.timedelta(minutes=12)
    at = lambda seconds: t + dt.timedelta(seconds=seconds)  # noqa: E731
    pipeline = Pipeline(name="sessions", schema=SCHEMA, gold_tables=(CUSTOMER_SESSIONS,))
    producer = make_producer(config)

    def produce(events: list[tuple[int, dict]]) -> None:
        for partition, event in events:
            producer.send(topic, key=event["order_id"].encode(), value=json.dumps(event).encode(), partition=partition)
        producer.flush()

    try:
        produce([(1, marketplace_event(ORDER_PLACED, "o1", at(0), 100, customer="c8")),
                 (1, marketplace_event(ORDER_PLACED, "o2", at(200), 100, customer="c8")),
                 (1, marketplace_event(ORDER_PLACED, "o3", at(400), 100, customer="c8")),
                 (1, marketplace_event(ORDER_PLACED, "o4", at(0), 100, customer="c9"))])
        StreamJob(spark, config, target_of(config, pipeline)).run()
        produce([(0, marketplace_event(ORDER_PLACED, "o2", at(600), 300, customer="c8")),
                 (0, marketplace_event(ORDER_PLACED, "o5", at(100), 100, customer="c9"))])
        job = StreamJob(spark, config, target_of(config, pipeline))
        job.run()
    finally:
        producer.close()

    written = spark.read.format("delta").load(job.store).where("_kind = 'gold.customer_sessions'")
    assert sorted((r._batch_id, r.customer_sessions__customer_id, r._reset) for r in written.collect()) == [
        (0, "c8", False), (0, "c9", False), (1, "c8", True), (1, "c8", True), (1, "c9", False)], \
        "c9 gets a partial row of its added event, c8 the reset of its two sessions, recomputed"
    sessions = sorted((r.customer_id, as_utc(r.session_start), as_utc(r.session_end), r.events) for r in
                      read_stream_table(spark, config, job.tables.gold("customer_sessions"), pipeline).collect())
    assert sessions == [("c8", at(0), at(0), 1), ("c8", at(400), at(600), 2), ("c9", at(0), at(100), 2)]
    run = audit(spark, config, target_of(config, pipeline))
    assert run.success, [(v.table.label, v.diff.counts) for v in run.verdicts if not v.success]


def test_a_pipeline_declared_only_in_the_tests_runs_through_the_same_engine(spark, settings, make_topic, tmp_path):
    pipeline = load_pipeline("tests.support.sensor_pipeline:PIPELINE")
    config = stream_settings(make_topic, settings, tmp_path, pipeline.topic, partitions=2, allowed_lateness_s=3 * 3600)
    hour = dt.datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    minutes_before = lambda m: hour - dt.timedelta(minutes=m)  # noqa: E731
    readings = [("dev-a", 100, 215), ("dev-a", 95, 198), ("dev-a", 30, 240), ("dev-a", 25, 251),
                ("dev-b", 50, -35), ("dev-b", 10, -12), ("dev-b", 5 * 60 + 60, 100)]  # the last one is late
    values = [(device, json.dumps({"reading_id": f"r{i}", "kind": "reading", "measured_at": iso(minutes_before(m)),
                                   "schema_version": 1, "device_id": device, "celsius_tenths": tenths}).encode())
              for i, (device, m, tenths) in enumerate(readings)]
    below_zero = json.dumps({"reading_id": "cold", "kind": "reading", "measured_at": iso(minutes_before(5)),
                             "schema_version": 1, "device_id": "dev-c", "celsius_tenths": -3000}).encode()
    send(config, pipeline.topic, [*values, ("dev-c", b'{"reading_id": "r9", '), ("dev-c", below_zero)])

    job = StreamJob(spark, config, target_of(config, pipeline))
    job.run(until_caught_up=True)

    table = lambda name: read_stream_table(spark, config, name, pipeline)  # noqa: E731
    assert job.tables.gold("device_hourly") == "gold.sensors_device_hourly"
    gold = {(r.device_id, as_utc(r.hour_start)): (r.readings, r.min_tenths, r.max_tenths, r.sum_tenths)
            for r in table(job.tables.gold("device_hourly")).collect()}
    assert gold == {("dev-a", hour - dt.timedelta(hours=2)): (2, 198, 215, 413),
                    ("dev-a", hour - dt.timedelta(hours=1)): (2, 240, 251, 491),
                    ("dev-b", hour - dt.timedelta(hours=1)): (2, -35, -12, -47)}
    late = read_stream_table(spark, config, job.tables.late_events, pipeline)
    assert [r.reading_id for r in late.collect()] == ["r6"]
    assert sorted((bytes(r.value), r.reason) for r in table(job.tables.dead_letters).collect()) == \
        [(below_zero, "below_minimum:celsius_tenths"), (b'{"reading_id": "r9", ', "malformed_json")]
    assert table(job.tables.bronze).count() == len(readings) + 2


def test_a_record_earlier_in_the_log_that_arrives_in_a_later_batch_takes_the_id_and_moves_its_gold_key(
        spark, settings, make_topic, tmp_path):
    """Batch 0 holds reading r1 of dev-b on partition 1. Batch 1 brings a conflicting r1 of dev-a on partition 0:
    earlier in the log, so it wins. The stream must take r1 out of dev-b's hour and count it in dev-a's, exactly
    as the batch recompute of the whole log does, and keep the dev-b record as the conflict."""
    from kafka import KafkaProducer

    pipeline = load_pipeline("tests.support.sensor_pipeline:PIPELINE")
    config = stream_settings(make_topic, settings, tmp_path, pipeline.topic, partitions=2)
    measured = dt.datetime.now(UTC) - dt.timedelta(minutes=5)

    def reading(device: str, tenths: int) -> bytes:
        return json.dumps({"reading_id": "r1", "kind": "reading", "measured_at": iso(measured), "schema_version": 1,
                           "device_id": device, "celsius_tenths": tenths}).encode()

    producer = KafkaProducer(bootstrap_servers=config.kafka_bootstrap_servers)
    try:
        producer.send(pipeline.topic, key=b"dev-b", value=reading("dev-b", 100), partition=1).get(timeout=30)
        StreamJob(spark, config, target_of(config, pipeline)).run()
        producer.send(pipeline.topic, key=b"dev-a", value=reading("dev-a", 250), partition=0).get(timeout=30)
        job = StreamJob(spark, config, target_of(config, pipeline))
        job.run()
    finally:
        producer.close()

    gold = {r.device_id: (r.readings, r.sum_tenths)
            for r in read_stream_table(spark, config, job.tables.gold("device_hourly"), pipeline).collect()}
    assert gold == {"dev-a": (1, 250)}, "the displaced winner's key was recomputed"
    conflicts = read_stream_table(spark, config, job.tables.duplicates, pipeline).collect()
    assert [(r.partition, r.kind, r.winner_partition) for r in conflicts] == [(1, "conflict", 0)]
    run = audit(spark, config, target_of(config, pipeline))
    assert run.success, [(v.table.label, v.diff.counts) for v in run.verdicts if not v.success]


def test_a_pipeline_with_doubles_decimals_booleans_and_dates_streams_and_reconciles_exactly(
        spark, settings, make_topic, tmp_path):
    pipeline = load_pipeline("tests.support.trip_pipeline:PIPELINE")
    config = stream_settings(make_topic, settings, tmp_path, pipeline.topic, partitions=2)
    now = dt.datetime.now(UTC).replace(microsecond=0)
    offset = dt.timezone(dt.timedelta(hours=2))
    trips = [("t1", "north", now, "12.50", 3.2, False), ("t2", "north", now, "7.05", 11.75, True),
             ("t3", "south", now.astimezone(offset), "0.10", 0.4, False),
             ("t4", "south", now.astimezone(offset), "1234.99", 52.0, True)]
    values = [(zone, (f'{{"trip_id": "{trip}", "record_type": "trip", "picked_up_at": "{at.isoformat()}", '
                      f'"schema_version": 1, "zone": "{zone}", "service_day": "{now.date().isoformat()}", '
                      f'"distance_km": {km}, "fare": {fare}, "shared": {str(shared).lower()}, '
                      f'"dropped_off_ms": {int(now.timestamp() * 1000) + 60_000}}}').encode())
              for trip, zone, at, fare, km, shared in trips]
    too_precise = values[0][1].replace(b'"trip_id": "t1"', b'"trip_id": "t5"').replace(b'"fare": 12.50',
                                                                                      b'"fare": 12.505')
    send(config, pipeline.topic, [*values, ("north", too_precise), ("north", values[1][1])])

    StreamJob(spark, config, target_of(config, pipeline)).run(until_caught_up=True)
    run = audit(spark, config, target_of(config, pipeline))

    assert run.success, run.verdicts
    tables = pipeline.tables()
    read = lambda name: read_stream_table(spark, config, name, pipeline).collect()  # noqa: E731
    gold = {r.zone: (r.trips, r.shared_trips, r.fares, r.longest_km, as_utc(r.last_drop_off))
            for r in read(tables.gold("zone_daily"))}
    drop_off = now + dt.timedelta(minutes=1)
    assert gold == {"north": (2, 1, Decimal("19.55"), 11.75, drop_off),
                    "south": (2, 1, Decimal("1235.09"), 52.0, drop_off)}
    assert [(bytes(r.value), r.reason) for r in read(tables.dead_letters)] == [(too_precise, "wrong_type:fare")]


def test_a_year_old_backfill_then_live_events_flags_only_real_stragglers_late_in_stream_and_batch(
        spark, settings, make_topic, tmp_path):
    """Under the high-water-mark rule a history loaded in time order is on time; the append-time default would have
    made every record of it late. The stream fails once right after a batch's commit, so the next start reads
    the marks back from the candidates the store holds."""
    sensors = load_pipeline("tests.support.sensor_pipeline:PIPELINE")
    pipeline = dataclasses.replace(sensors, name="sensor_history", topic=f"sensors.history.{uuid.uuid4().hex[:8]}",
                                   table_prefix="history_", lateness=Lateness(allowed_s=600, against=HIGH_WATER_MARK))
    config = stream_settings(make_topic, settings, tmp_path, pipeline.topic, partitions=1,
                             max_offsets_per_trigger=15)
    now = now_ms()
    year_ago = now - dt.timedelta(days=365)
    history = [sensor_reading(f"h{i}", year_ago + dt.timedelta(minutes=i)) for i in range(40)]
    history.insert(20, sensor_reading("h-behind", year_ago + dt.timedelta(minutes=14)))  # 5 min behind its mark
    live = [sensor_reading(f"live{i}", now - dt.timedelta(seconds=30 - i)) for i in range(5)]
    stragglers = [sensor_reading("late-2h", now - dt.timedelta(hours=2)), sensor_reading("late-year", year_ago)]
    send(config, pipeline.topic, [*history, *live, *stragglers])

    with pytest.raises(StreamFailed):
        StreamJob(spark, config.with_overrides(fault_inject="after_write@1"), target_of(config, pipeline)).run()
    job = StreamJob(spark, config, target_of(config, pipeline))
    job.run()
    run = audit(spark, config, target_of(config, pipeline))

    assert run.success, [(v.table.label, v.diff.counts) for v in run.verdicts if not v.success]
    tables = pipeline.tables()
    late_rows = read_stream_table(spark, config, tables.late_events, pipeline).collect()
    assert {r.reading_id for r in late_rows} == {"late-2h", "late-year"}
    bronze = next(t for t in stream_tables(target_of(config, pipeline)) if t.label == tables.bronze)
    snapshot = spark.read.format("delta").option("versionAsOf", run.snapshot.versions[bronze.snapshot]) \
        .load(str(table_path(config, bronze.snapshot)))
    assert {r.reading_id for r in snapshot.where("is_winner AND is_late").collect()} == {"late-2h", "late-year"}, \
        "the batch path agrees"
    events = read_stream_table(spark, config, tables.events, pipeline)
    assert events.count() == len(history) + len(live) + len(stragglers)
    by_append_time = events.where(lateness_flag("measured_at", LatenessRule(600))).where("reading_id LIKE 'h%'")
    assert by_append_time.count() == len(history), "the append-time rule would have flagged the whole history"
