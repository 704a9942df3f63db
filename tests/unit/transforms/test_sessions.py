"""Which sessions an added or removed event can change: those within one gap of it, and nothing else."""

import datetime as dt

from pyspark.testing import assertDataFrameEqual

from spark_apps.pipeline.declaration import SPAN_HI, SPAN_LO, Sessions
from spark_apps.transforms.sessions import session_spans

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
