"""Maintenance decisions without Spark: which tables, when checkpoint and commit log agree, conflict retries."""

import pytest
from delta.exceptions import ConcurrentDeleteReadException

from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.ops.maintenance import (
    CHECKPOINT,
    Check,
    MaintenanceReport,
    TableMaintenance,
    checkpoint_problem,
    maintained_tables,
    summary_lines,
    with_retries,
)

APP = "kappa-marketplace-1"


def test_maintenance_covers_stream_tables_commit_log_snapshots_and_audit_tables():
    tables = maintained_tables(PIPELINE)
    assert {"bronze.events_raw", "silver.events", "gold.merchant_revenue", "audit.dead_letters",
            "audit.stream_commits", "batch.events_raw", "batch.merchant_revenue", "audit.alerts",
            "audit.reconciliation_ledger", "audit.serving_state"} <= set(tables)
    assert len(tables) == len(set(tables))


def test_checkpoint_and_commit_log_agree_with_one_batch_in_flight():
    assert checkpoint_problem(APP, {APP: 7}, done_before=7, done_after=7) == ""
    assert checkpoint_problem(APP, {APP: 8}, done_before=7, done_after=7) == "", "recorded, not yet committed"
    assert checkpoint_problem(None, {}, done_before=-1, done_after=-1) == "", "a stream that never ran"


def test_a_missing_checkpoint_while_tables_hold_batches_is_a_problem():
    assert checkpoint_problem(None, {APP: 3}, -1, -1).startswith(
        "the checkpoint is missing but the tables record batches up to 3")


def test_a_checkpoint_older_or_newer_than_the_tables_or_of_another_app_is_a_problem():
    assert "older than the tables" in checkpoint_problem(APP, {APP: 9}, 7, 7)
    assert "tables are behind the checkpoint" in checkpoint_problem(APP, {APP: 5}, 7, 7)
    assert "checkpoint belongs to" in checkpoint_problem(APP, {"kappa-marketplace-0": 2}, -1, -1)


def test_a_conflicting_commit_is_retried_three_times_then_raised(caplog):
    calls, pauses = [], []

    def conflicting():
        calls.append(1)
        raise ConcurrentDeleteReadException("a concurrent MERGE removed a file this OPTIMIZE read")

    with pytest.raises(ConcurrentDeleteReadException):
        with_retries(conflicting, "OPTIMIZE silver.events", sleep=pauses.append)
    assert len(calls) == 4 and pauses == [1, 2, 4]
    assert [r.getMessage().split("; ")[1] for r in caplog.records] == ["retry 1 of 3", "retry 2 of 3", "retry 3 of 3"]


def test_a_conflict_that_clears_returns_the_result_and_other_errors_are_not_retried():
    attempts = iter([ConcurrentDeleteReadException("conflict"), "done"])

    def flaky():
        outcome = next(attempts)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def broken():
        raise ValueError("not a Delta table")

    assert with_retries(flaky, "OPTIMIZE gold.order_status", sleep=lambda _: None) == "done"
    with pytest.raises(ValueError):
        with_retries(broken, "VACUUM gold.order_status", sleep=lambda _: pytest.fail("retried a non-conflict"))


def test_the_report_is_one_line_per_table_and_check_and_fails_on_either():
    report = MaintenanceReport("marketplace", tables=[TableMaintenance("bronze.events_raw", 12, 1, 0, 3.25)],
                               checks=[Check(CHECKPOINT, True, "committed batch 4")])
    assert summary_lines(report) == [
        f"{'bronze.events_raw':36s} OK     files 12 -> 1, 0 vacuumed, 3.2s",
        f"{'check checkpoint':36s} OK     committed batch 4"]
    assert report.ok
    report.checks.append(Check("log retention", False, "partition 0 lost offsets [0,10)"))
    assert not report.ok
