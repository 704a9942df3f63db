"""The pure transforms shared by stream and batch, on small hand-made frames."""

import datetime as dt

from pyspark.testing import assertDataFrameEqual

from spark_apps.marketplace.pipeline import merchant_revenue, revenue_key_rows
from spark_apps.settings import Settings
from spark_apps.transforms import lateness_flag, losers, rows_of_keys, touched_keys, winners

T0 = dt.datetime(2026, 11, 21, 10, 0, 0)
CANDIDATE_SCHEMA = ("event_id string, event_time timestamp, amount long, topic string, partition int, "
                    "offset long, log_append_time timestamp, payload_fingerprint string")


def candidate(event_id, partition, offset, fingerprint="a", event_delay_s=0, appended_after_s=1, amount=10):
    return (event_id, T0 + dt.timedelta(seconds=event_delay_s), amount, "t", partition, offset,
            T0 + dt.timedelta(seconds=event_delay_s + appended_after_s), fingerprint)


def test_the_lowest_partition_and_offset_wins_whatever_the_input_order(spark):
    rows = [candidate("e1", 1, 50, "late-copy"), candidate("e1", 0, 90, "first"), candidate("e2", 2, 7)]
    frame = spark.createDataFrame(rows, CANDIDATE_SCHEMA)
    chosen = winners(frame, "event_id", "event_time", allowed_lateness_s=900)
    expected = spark.createDataFrame([("e1", 0, 90, "first"), ("e2", 2, 7, "a")],
                                     "event_id string, partition int, offset long, payload_fingerprint string")
    assertDataFrameEqual(chosen.select("event_id", "partition", "offset", "payload_fingerprint"), expected)


def test_later_records_are_duplicates_or_conflicts_by_payload(spark):
    rows = [candidate("e1", 0, 1, "x"), candidate("e1", 0, 5, "x"), candidate("e1", 0, 9, "y"), candidate("e2", 1, 3)]
    frame = spark.createDataFrame(rows, CANDIDATE_SCHEMA)
    rejected = losers(frame, "event_id").select("event_id", "offset", "kind", "winner_offset")
    assertDataFrameEqual(rejected, spark.createDataFrame(
        [("e1", 5, "duplicate", 1), ("e1", 9, "conflict", 1)],
        "event_id string, offset long, kind string, winner_offset long"))


def test_lateness_is_decided_by_the_log_append_time_only(spark):
    rows = [candidate("on-time", 0, 1, appended_after_s=900), candidate("late", 0, 2, appended_after_s=901)]
    frame = spark.createDataFrame(rows, CANDIDATE_SCHEMA)
    flags = frame.select("event_id", lateness_flag("event_time", 900).alias("is_late"))
    assertDataFrameEqual(flags, spark.createDataFrame([("on-time", False), ("late", True)],
                                                      "event_id string, is_late boolean"))


def test_touched_keys_are_distinct_and_select_only_their_rows(spark):
    frame = spark.createDataFrame([("a", 1), ("a", 2), ("b", 3), (None, 4)], "k string, v long")
    keys = touched_keys(frame.where("v <= 2"), ("k",))
    assertDataFrameEqual(keys, spark.createDataFrame([("a",)], "k string"))
    assertDataFrameEqual(rows_of_keys(frame, keys, ("k",)),
                         spark.createDataFrame([("a", 1), ("a", 2)], "k string, v long"))


def test_merchant_revenue_sums_payments_minus_refunds_per_window_and_currency(spark):
    settings = Settings(window_s=60)
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
    result = merchant_revenue(revenue_key_rows(events, settings), settings)
    expected = spark.createDataFrame([
        ("m1", at(0), at(60), "EUR", 2, 500, 200, 300, 2),
        ("m1", at(60), at(120), "EUR", 0, 300, 0, 300, 1),
        ("m2", at(0), at(60), "USD", 1, 0, 0, 0, 1),
    ], "merchant_id string, window_start timestamp, window_end timestamp, currency string, orders long, "
       "gross_cents long, refunds_cents long, net_cents long, distinct_customers long")
    assertDataFrameEqual(result, expected)
