"""Which sessions an added or removed event can change (those within one gap of it, and nothing else), and how
stored sessions extended by added events equal sessions recomputed from all of them."""

import datetime as dt
import random

import pytest
from pyspark.testing import assertDataFrameEqual

from spark_apps.core.settings import Settings
from spark_apps.marketplace.pipeline import CUSTOMER_SESSIONS
from spark_apps.pipeline.declaration import SPAN_HI, SPAN_LO, Sessions
from spark_apps.transforms.sessions import session_spans, sessions_after

pytestmark = pytest.mark.integration

T0 = dt.datetime(2026, 11, 25, 10, 0, 0)
GAP = Sessions(gap_s=300)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def spans(spark, changed: list[tuple], sessions: list[tuple]):
    changed_df = spark.createDataFrame(changed, "customer_id string, event_time timestamp, event_id string")
    sessions_df = spark.createDataFrame(sessions, "customer_id string, session_start timestamp, "
                                                  "session_end timestamp, events long")
    return session_spans(changed_df, sessions_df, ("customer_id",), GAP)


def expected(spark, rows: list[tuple]):
    return spark.createDataFrame(rows, f"customer_id string, {SPAN_LO} timestamp, {SPAN_HI} timestamp")


def test_an_event_between_two_sessions_within_a_gap_of_both_spans_both(spark):
    sessions = [("c1", at(0), at(10), 2), ("c1", at(400), at(500), 3), ("c1", at(2000), at(2100), 1)]
    assertDataFrameEqual(spans(spark, [("c1", at(200), "e")], sessions), expected(spark, [("c1", at(0), at(500))]))


def test_the_gap_is_inclusive_and_a_session_one_microsecond_further_away_is_left_alone(spark):
    sessions = [("c1", at(0), at(0), 1), ("c2", at(0), at(0), 1)]
    just_beyond = at(300) + dt.timedelta(microseconds=1)
    changed = [("c1", at(300), "e1"), ("c2", just_beyond, "e2")]
    assertDataFrameEqual(spans(spark, changed, sessions), expected(spark, [
        ("c1", at(0), at(300)), ("c2", just_beyond, just_beyond)]))


def test_a_key_changed_in_several_places_gets_one_span_over_all_of_them_and_other_keys_none(spark):
    sessions = [("c1", at(0), at(60), 4), ("c1", at(1000), at(1100), 2), ("c1", at(5000), at(5000), 1),
                ("c9", at(0), at(50), 2)]
    changed = [("c1", at(30), "e1"), ("c1", at(1150), "e2"), ("c3", at(70), "e3"), (None, at(70), "e4"),
               ("c3", None, "e5")]
    assertDataFrameEqual(spans(spark, changed, sessions), expected(spark, [
        ("c1", at(0), at(1150)), ("c3", at(70), at(70))]))


EVENT_SCHEMA = ("event_id string, event_type string, event_time timestamp, order_id string, customer_id string, "
                "merchant_id string, amount_cents long, currency string")


def random_events(seed: int, n: int) -> list[tuple]:
    """Events of three customers at times that both cluster (within a gap) and spread (beyond one), with ties."""
    rng = random.Random(seed)
    return [(f"e{i}", rng.choice(["order_placed", "payment_captured", "order_refunded"]),
             at(rng.choice([rng.randrange(0, 4000, 50), rng.randrange(0, 4000)])), f"o{i}",
             rng.choice(["c1", "c2", "c3"]), "m1", 100, "EUR") for i in range(n)]


def sessions_of(spark, rows: list[tuple]):
    settings = Settings()
    frame = spark.createDataFrame(rows, EVENT_SCHEMA)
    return CUSTOMER_SESSIONS.compute(CUSTOMER_SESSIONS.key_rows(frame, settings), settings)


def everywhere(rows, column=None):
    """Spans that hold every row: the whole table is the span."""
    return rows


def test_stored_sessions_extended_by_added_events_equal_the_sessions_of_all_the_events(spark):
    """Added events that grow, bridge and start sessions, merged by the declared ``combine`` into the stored ones."""
    settings = Settings()
    for seed in range(3):
        events = random_events(seed, 120)
        stored, added = events[:80], events[80:]
        extended = sessions_after(CUSTOMER_SESSIONS, sessions_of(spark, stored),
                                  spark.createDataFrame(added, EVENT_SCHEMA), None,
                                  spark.createDataFrame([], EVENT_SCHEMA), everywhere, settings)
        assertDataFrameEqual(extended, sessions_of(spark, events))


def test_a_key_an_event_left_is_recomputed_from_its_events_and_the_others_extended(spark):
    """A removed event can split a session, which no merge of stored sessions undoes: its key is recomputed."""
    settings = Settings()
    split = [("s1", "order_placed", at(0), "o1", "c9", "m1", 100, "EUR"),
             ("s2", "order_placed", at(250), "o2", "c9", "m1", 100, "EUR"),
             ("s3", "order_placed", at(500), "o3", "c9", "m1", 100, "EUR")]
    events = random_events(7, 100) + split
    stored, added, left = events[:60] + split, events[60:100], [split[1]]
    after = [e for e in events if e not in left]
    extended = sessions_after(CUSTOMER_SESSIONS, sessions_of(spark, stored), spark.createDataFrame(added, EVENT_SCHEMA),
                              spark.createDataFrame(left, EVENT_SCHEMA), spark.createDataFrame(after, EVENT_SCHEMA),
                              everywhere, settings)
    assertDataFrameEqual(extended, sessions_of(spark, after))
    assert extended.where("customer_id = 'c9'").count() == 2, "the removed event split c9's session in two"
