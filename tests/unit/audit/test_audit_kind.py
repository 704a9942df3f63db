"""Which kind of audit a run is: incremental only on a verified base, full on its own schedule."""

import datetime as dt

from spark_apps.audit.incremental import AUTO, Base, choose
from spark_apps.audit.ledger import FULL, INCREMENTAL

NOW = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)
BASE = Base(run_id="r1", end_offsets={0: 10}, records=10, snapshot_versions={}, stream_versions={})
DAY = 86_400


def test_auto_extends_the_verified_run_while_the_last_full_run_is_recent():
    plan = choose(AUTO, BASE, "", NOW - dt.timedelta(hours=3), NOW, DAY)
    assert (plan.kind, plan.base) == (INCREMENTAL, BASE) and "r1" in plan.reason


def test_auto_recomputes_the_whole_log_once_the_last_full_run_is_a_day_old():
    plan = choose(AUTO, BASE, "", NOW - dt.timedelta(hours=24), NOW, DAY)
    assert (plan.kind, plan.base) == (FULL, None) and "86400s old" in plan.reason


def test_auto_without_a_verified_run_is_full_and_says_why():
    plan = choose(AUTO, None, "the newest run r9: it did not succeed", NOW, NOW, DAY)
    assert plan.kind == FULL and "it did not succeed" in plan.reason


def test_full_asked_is_full_even_on_a_verified_base():
    assert choose(FULL, BASE, "", NOW, NOW, DAY).kind == FULL


def test_incremental_asked_on_a_verified_base_ignores_the_full_schedule():
    assert choose(INCREMENTAL, BASE, "", NOW - dt.timedelta(days=9), NOW, DAY).kind == INCREMENTAL
