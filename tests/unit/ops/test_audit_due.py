"""When the scheduled reconciliation audits: decided at the run's ``as_of`` (its data interval), not the wall clock."""

import datetime as dt

from spark_apps.ops.scheduled_audit import Due, ScheduledReconciliation, audit_due
from spark_apps.serving.state import KAPPA, LAMBDA

AS_OF = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)
GOLD = ["gold.a", "gold.b"]
EVERY_S = 6 * 3600
ALL_KAPPA = {"gold.a": KAPPA, "gold.b": KAPPA}


def hours_before(hours: float) -> dt.datetime:
    return AS_OF - dt.timedelta(hours=hours)


def test_a_run_is_due_every_time_while_any_gold_table_serves_the_batch_snapshot():
    due = audit_due({"gold.a": KAPPA, "gold.b": LAMBDA}, GOLD, hours_before(0.1), AS_OF, EVERY_S)
    assert due.due and due.reason.startswith("gold.b served from the batch snapshot")


def test_a_table_never_decided_counts_as_served_from_the_batch():
    assert audit_due({"gold.a": KAPPA}, GOLD, hours_before(0.1), AS_OF, EVERY_S).due


def test_the_first_audit_is_always_due():
    due = audit_due(ALL_KAPPA, GOLD, None, AS_OF, EVERY_S)
    assert due == Due(True, "no table served from the batch snapshot; audit every run")


def test_a_run_is_due_when_the_last_reconciliation_is_older_than_the_interval_at_as_of():
    due = audit_due(ALL_KAPPA, GOLD, hours_before(7), AS_OF, EVERY_S)
    assert due == Due(True, "every gold table serves the stream; the last audit is 25200s old, audit now")


def test_a_run_is_due_when_the_last_reconciliation_is_exactly_the_interval_old():
    assert audit_due(ALL_KAPPA, GOLD, hours_before(6), AS_OF, EVERY_S).due


def test_a_run_skips_when_the_last_reconciliation_is_younger_than_the_interval_at_as_of():
    due = audit_due(ALL_KAPPA, GOLD, hours_before(1), AS_OF, EVERY_S)
    assert due == Due(False, "every gold table serves the stream; the last audit is 3600s old, the next is due "
                             "after 21600s")


def test_a_late_run_decides_by_its_as_of_not_by_when_it_runs():
    """The same inputs give the same answer however late the scheduler starts the run: only as_of is a clock."""
    last = hours_before(1)
    assert not audit_due(ALL_KAPPA, GOLD, last, AS_OF, EVERY_S).due
    assert audit_due(ALL_KAPPA, GOLD, last, AS_OF + dt.timedelta(hours=5), EVERY_S).due


def test_a_naive_last_run_time_is_read_as_local_time():
    """Spark returns the ledger's timestamps naive, in the session's (local) time zone."""
    naive_local = hours_before(7).astimezone().replace(tzinfo=None)
    assert audit_due(ALL_KAPPA, GOLD, naive_local, AS_OF, EVERY_S).due


def test_a_skipped_run_reports_only_that_it_skipped_and_why():
    skipped = ScheduledReconciliation("marketplace", None, Due(False, "not yet"))
    assert skipped.skipped and skipped.as_json() == {"skipped": True, "reason": "not yet"}
