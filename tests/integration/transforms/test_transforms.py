"""The pure transforms shared by stream and batch, on small hand-made frames."""

import datetime as dt

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from spark_apps.core.settings import Settings
from spark_apps.marketplace.pipeline import (
    MERCHANT_REVENUE,
    ORDER_STATUS,
    SESSION_GAP_S,
    WINDOW_S,
    customer_key_rows,
    customer_sessions,
    merchant_revenue,
    order_key_rows,
    order_status,
    revenue_key_rows,
)
from spark_apps.pipeline.lateness import HIGH_WATER_MARK, LatenessRule
from spark_apps.transforms.events import (
    HIGH_WATER_COLUMN,
    added_winners,
    displaced_winners,
    duplicates,
    earlier_in_log,
    gold_inputs_changed,
    high_water_marks,
    late_events,
    lateness_flag,
    rows_of_keys,
    touched_keys,
    winners,
    with_high_water,
)
from spark_apps.transforms.store import gold_rows

pytestmark = pytest.mark.integration

T0 = dt.datetime(2026, 11, 21, 10, 0, 0)
CANDIDATE_SCHEMA = ("event_id string, event_time timestamp, amount long, topic string, partition int, "
                    "offset long, log_append_time timestamp, payload_fingerprint string")


def candidate(event_id, partition, offset, fingerprint="a", event_delay_s=0, appended_after_s=1, amount=10):
    return (event_id, T0 + dt.timedelta(seconds=event_delay_s), amount, "t", partition, offset,
            T0 + dt.timedelta(seconds=event_delay_s + appended_after_s), fingerprint)


def test_the_lowest_partition_and_offset_wins_whatever_the_input_order(spark):
    rows = [candidate("e1", 1, 50, "late-copy"), candidate("e1", 0, 90, "first"), candidate("e2", 2, 7)]
    frame = spark.createDataFrame(rows, CANDIDATE_SCHEMA)
    chosen = winners(frame, "event_id", "event_time", LatenessRule(900))
    expected = spark.createDataFrame([("e1", 0, 90, "first"), ("e2", 2, 7, "a")],
                                     "event_id string, partition int, offset long, payload_fingerprint string")
    assertDataFrameEqual(chosen.select("event_id", "partition", "offset", "payload_fingerprint"), expected)


def test_later_records_are_duplicates_or_conflicts_by_payload(spark):
    rows = [candidate("e1", 0, 1, "x"), candidate("e1", 0, 5, "x"), candidate("e1", 0, 9, "y"), candidate("e2", 1, 3),
            candidate("e3", 1, 4, "z"), candidate("e3", 0, 8, "z")]
    frame = spark.createDataFrame(rows, CANDIDATE_SCHEMA)
    events = winners(frame, "event_id", "event_time", LatenessRule(900))
    rejected = duplicates(frame, events, "event_id").select("event_id", "partition", "offset", "kind",
                                                           "winner_partition", "winner_offset")
    assertDataFrameEqual(rejected, spark.createDataFrame(
        [("e1", 0, 5, "duplicate", 0, 1), ("e1", 0, 9, "conflict", 0, 1), ("e3", 1, 4, "duplicate", 0, 8)],
        "event_id string, partition int, offset long, kind string, winner_partition int, winner_offset long"))


def test_only_new_on_time_records_and_the_winners_they_displaced_can_change_gold(spark):
    rule = LatenessRule(900)
    earlier = winners(spark.createDataFrame([candidate("kept", 0, 1), candidate("lost", 1, 5)], CANDIDATE_SCHEMA),
                      "event_id", "event_time", rule)
    new = spark.createDataFrame([candidate("kept", 0, 9), candidate("lost", 0, 2), candidate("fresh", 0, 10),
                                 candidate("tardy", 0, 11, appended_after_s=901)], CANDIDATE_SCHEMA)
    now = winners(earlier.drop("is_late").unionByName(new), "event_id", "event_time", rule)
    displaced = displaced_winners(earlier, now, "event_id")
    changed = gold_inputs_changed(new, displaced, "event_time", rule)
    assert changed.columns == new.columns
    assert sorted((r.event_id, r.partition, r.offset) for r in changed.collect()) == [
        ("fresh", 0, 10), ("kept", 0, 9), ("lost", 0, 2), ("lost", 1, 5)], "no late record, no winner still winning"
    assert [(r.event_id, r.offset) for r in displaced.collect()] == [("lost", 5)]
    assert sorted((r.event_id, r.partition, r.offset) for r in added_winners(now, new, "event_id").collect()) == [
        ("fresh", 0, 10), ("lost", 0, 2)], "a losing duplicate and a late winner add nothing to gold"


def test_the_late_events_are_the_events_flagged_late(spark):
    rows = [candidate("on-time", 0, 1, appended_after_s=900), candidate("late", 0, 2, appended_after_s=901)]
    events = winners(spark.createDataFrame(rows, CANDIDATE_SCHEMA), "event_id", "event_time", LatenessRule(900))
    assert [r.event_id for r in late_events(events).collect()] == ["late"]
    assert late_events(events).columns == events.columns


def test_merging_each_batchs_first_record_by_log_position_gives_the_first_record_of_all_batches(spark):
    """What the stream's MERGE into silver.events does per micro-batch, in plain DataFrames: keep the table's row
    unless the batch's first record of the id is earlier in the log; the result is the winners of everything."""
    batches = [[candidate("e1", 1, 5, "b"), candidate("e2", 0, 1)],
               [candidate("e1", 0, 9, "a"), candidate("e1", 1, 7, "c"), candidate("e3", 2, 1)],
               [candidate("e2", 0, 4, "later"), candidate("e3", 1, 9, "lower-partition")]]
    rule = LatenessRule(900)
    table = None
    for rows in batches:
        first = winners(spark.createDataFrame(rows, CANDIDATE_SCHEMA), "event_id", "event_time", rule)
        if table is None:
            table = first
            continue
        joined = table.alias("t").join(first.alias("s"), "event_id", "full_outer")
        take_new = F.col("t.offset").isNull() | (F.col("s.offset").isNotNull() & F.expr(earlier_in_log("s", "t")))
        table = joined.select("event_id", *[F.when(take_new, F.col(f"s.{c}")).otherwise(F.col(f"t.{c}")).alias(c)
                                            for c in first.columns if c != "event_id"])
    everything = spark.createDataFrame([r for rows in batches for r in rows], CANDIDATE_SCHEMA)
    assertDataFrameEqual(table.select(*sorted(table.columns)),
                         winners(everything, "event_id", "event_time", rule).select(*sorted(table.columns)))


def test_lateness_is_decided_by_the_log_append_time_only(spark):
    rows = [candidate("on-time", 0, 1, appended_after_s=900), candidate("late", 0, 2, appended_after_s=901)]
    frame = spark.createDataFrame(rows, CANDIDATE_SCHEMA)
    flags = frame.select("event_id", lateness_flag("event_time", LatenessRule(900)).alias("is_late"))
    assertDataFrameEqual(flags, spark.createDataFrame([("on-time", False), ("late", True)],
                                                      "event_id string, is_late boolean"))


HIGH_WATER = LatenessRule(600, HIGH_WATER_MARK, future_skew_s=300)


def backfill(*rows) -> list:
    """(id, partition, offset, event time in seconds after T0, append time in seconds after T0) candidates."""
    return [(event_id, T0 + dt.timedelta(seconds=at), 10, "t", partition, offset,
             T0 + dt.timedelta(seconds=appended), "a") for event_id, partition, offset, at, appended in rows]


def test_under_the_high_water_mark_rule_a_backfill_in_time_order_is_on_time_and_only_stragglers_are_late(spark):
    year_s = 365 * 86400
    rows = backfill(("old-1", 0, 0, -year_s, 0), ("old-2", 0, 1, -year_s + 60, 1),
                    ("old-3", 0, 2, -year_s + 60 - 600, 2),      # behind the mark by exactly the allowed 600 s
                    ("live", 0, 3, 0, 3), ("straggler", 0, 4, -601, 4),
                    ("other-partition", 1, 0, -year_s, 5))         # marks are per partition
    frame = with_high_water(spark.createDataFrame(rows, CANDIDATE_SCHEMA), "event_time", HIGH_WATER)
    flags = {r.event_id: r.is_late for r in winners(frame, "event_id", "event_time", HIGH_WATER).collect()}
    assert flags == {"old-1": False, "old-2": False, "old-3": False, "live": False, "straggler": True,
                     "other-partition": False}


def test_the_high_water_mark_carried_from_earlier_batches_gives_the_marks_of_one_pass_over_the_whole_log(spark):
    rows = backfill(("a", 0, 0, 100, 100), ("b", 0, 1, 5000, 5000), ("c", 0, 2, 3000, 5001), ("d", 1, 0, 50, 50),
                    ("e", 1, 1, 10, 51), ("f", 0, 3, 4000, 5002))
    whole = with_high_water(spark.createDataFrame(rows, CANDIDATE_SCHEMA), "event_time", HIGH_WATER)
    first = spark.createDataFrame(rows[:3], CANDIDATE_SCHEMA)
    carried = {int(r.partition): int(r.mark) for r in high_water_marks(first, "event_time", HIGH_WATER).collect()}
    second = with_high_water(spark.createDataFrame(rows[3:], CANDIDATE_SCHEMA), "event_time", HIGH_WATER, carried)
    in_two = with_high_water(first, "event_time", HIGH_WATER).unionByName(second)
    assertDataFrameEqual(in_two.select("event_id", HIGH_WATER_COLUMN), whole.select("event_id", HIGH_WATER_COLUMN))


def test_an_event_from_the_future_does_not_raise_the_high_water_mark(spark):
    rows = backfill(("ok", 0, 0, 0, 0), ("future", 0, 1, 10 * 86400, 1), ("next", 0, 2, 5, 2))
    frame = with_high_water(spark.createDataFrame(rows, CANDIDATE_SCHEMA), "event_time", HIGH_WATER)
    marks = {r.event_id: r[HIGH_WATER_COLUMN] for r in frame.collect()}
    assert marks == {"ok": None, "future": T0, "next": T0}
    assert not any(r.is_late for r in winners(frame, "event_id", "event_time", HIGH_WATER).collect())


def test_the_append_time_rule_adds_no_high_water_column(spark):
    frame = spark.createDataFrame(backfill(("a", 0, 0, 0, 0)), CANDIDATE_SCHEMA)
    assert with_high_water(frame, "event_time", LatenessRule(900)).columns == frame.columns


def test_touched_keys_are_distinct_and_select_only_their_rows(spark):
    frame = spark.createDataFrame([("a", 1), ("a", 2), ("b", 3), (None, 4)], "k string, v long")
    keys = touched_keys(frame.where("v <= 2"), ("k",))
    assertDataFrameEqual(keys, spark.createDataFrame([("a",)], "k string"))
    assertDataFrameEqual(rows_of_keys(frame, keys, ("k",)),
                         spark.createDataFrame([("a", 1), ("a", 2)], "k string, v long"))


def test_merchant_revenue_sums_payments_minus_refunds_per_window_and_currency(spark):
    assert WINDOW_S == 60
    settings = Settings()
    schema = "merchant_id string, event_type string, event_time timestamp, amount_cents long, customer_id string, " \
             "currency string"
    at = lambda s: T0 + dt.timedelta(seconds=s)  # noqa: E731
    events = spark.createDataFrame([
        ("m1", "order_placed", at(1), 500, "c1", "EUR"),
        ("m1", "payment_captured", at(2), 500, "c1", "EUR"),
        ("m1", "order_placed", at(30), 300, "c2", "EUR"),
        ("m1", "order_refunded", at(59), 200, "c1", "EUR"),
        ("m1", "payment_captured", at(60), 300, "c2", "EUR"),
        ("m2", "order_placed", at(5), 100, "c3", "USD"),
    ], schema)
    result = gold_rows(MERCHANT_REVENUE, events, settings)
    expected = spark.createDataFrame([
        ("m1", at(0), at(60), "EUR", 2, 500, 200, 300, 2),
        ("m1", at(60), at(120), "EUR", 0, 300, 0, 300, 1),
        ("m2", at(0), at(60), "USD", 1, 0, 0, 0, 1),
    ], "merchant_id string, window_start timestamp, window_end timestamp, currency string, orders long, "
       "gross_cents long, refunds_cents long, net_cents long, distinct_customers long")
    assertDataFrameEqual(result, expected)


MARKETPLACE_EVENT_SCHEMA = ("event_id string, event_type string, event_time timestamp, order_id string, "
                            "customer_id string, merchant_id string, amount_cents long, currency string")


def marketplace_event(event_id, event_type, seconds, order_id, amount=100, customer="c1"):
    return (event_id, event_type, T0 + dt.timedelta(seconds=seconds), order_id, customer, "m1", amount, "EUR")


def test_order_status_joins_orders_payments_and_refunds_full_outer_with_one_status_each(spark):
    settings = Settings()
    at = lambda s: T0 + dt.timedelta(seconds=s)  # noqa: E731
    events = spark.createDataFrame([
        marketplace_event("e1", "order_placed", 1, "placed"),
        marketplace_event("e2", "order_placed", 1, "paid", amount=900),
        marketplace_event("e3", "payment_captured", 5, "paid", amount=400),
        marketplace_event("e4", "payment_captured", 3, "paid", amount=500),
        marketplace_event("e5", "order_placed", 1, "refunded"),
        marketplace_event("e6", "payment_captured", 2, "refunded"),
        marketplace_event("e7", "order_refunded", 9, "refunded", amount=60),
        marketplace_event("e8", "payment_captured", 4, "orphan-payment", amount=70),
        marketplace_event("e9", "order_refunded", 6, "orphan-refund", amount=30),
    ], MARKETPLACE_EVENT_SCHEMA)
    result = gold_rows(ORDER_STATUS, events, settings)
    expected = spark.createDataFrame([
        ("placed", 100, at(1), 0, None, 0, None, "placed"),
        ("paid", 900, at(1), 900, at(3), 0, None, "paid"),
        ("refunded", 100, at(1), 100, at(2), 60, at(9), "refunded"),
        ("orphan-payment", None, None, 70, at(4), 0, None, "orphan_payment"),
        ("orphan-refund", None, None, 0, None, 30, at(6), "orphan_refund"),
    ], "order_id string, order_amount_cents long, placed_at timestamp, paid_cents long, paid_at timestamp, "
       "refunded_cents long, refunded_at timestamp, status string")
    assertDataFrameEqual(result.drop("customer_id", "merchant_id", "currency"), expected)


def test_every_gold_table_of_the_marketplace_reads_its_rows_once(spark, tmp_path):
    """A micro-batch recomputes each gold table from silver's rows of the affected keys: every read of those rows in
    a computation is another scan of silver."""
    settings = Settings()
    spark.createDataFrame([marketplace_event("e1", "order_placed", 1, "o1")], MARKETPLACE_EVENT_SCHEMA) \
        .write.parquet(str(tmp_path / "silver"))
    silver = spark.read.parquet(str(tmp_path / "silver"))
    for key_rows, compute in ((order_key_rows, order_status), (customer_key_rows, customer_sessions),
                              (revenue_key_rows, merchant_revenue)):
        plan = compute(key_rows(silver, settings), settings)._jdf.queryExecution().optimizedPlan().toString()
        assert plan.count("parquet") == 1, f"{compute.__name__} reads silver more than once:\n{plan}"


def test_an_event_that_closes_the_gap_merges_two_sessions(spark):
    assert SESSION_GAP_S == 300
    settings = Settings()
    at = lambda s: T0 + dt.timedelta(seconds=s)  # noqa: E731
    apart = [marketplace_event("e1", "order_placed", 0, "o1"), marketplace_event("e2", "order_placed", 301, "o2"),
             marketplace_event("e3", "order_placed", 0, "o3", customer="c2")]
    bridge = [marketplace_event("e4", "payment_captured", 150, "o1")]
    schema = ("customer_id string, session_start timestamp, session_end timestamp, duration_ms long, events long, "
              "orders long, payments long, refunds long")

    def sessions(rows):
        return customer_sessions(customer_key_rows(spark.createDataFrame(rows, MARKETPLACE_EVENT_SCHEMA), settings),
                                 settings)

    assertDataFrameEqual(sessions(apart), spark.createDataFrame([
        ("c1", at(0), at(0), 0, 1, 1, 0, 0), ("c1", at(301), at(301), 0, 1, 1, 0, 0),
        ("c2", at(0), at(0), 0, 1, 1, 0, 0)], schema))
    assertDataFrameEqual(sessions(apart + bridge), spark.createDataFrame([
        ("c1", at(0), at(301), 301_000, 3, 2, 1, 0), ("c2", at(0), at(0), 0, 1, 1, 0, 0)], schema))
