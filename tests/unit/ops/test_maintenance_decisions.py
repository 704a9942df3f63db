"""Maintenance decisions without Spark: which tables it keeps, and its report."""

from spark_apps.core.settings import Settings
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.ops.maintenance import (
    CHECKPOINT,
    Check,
    MaintenanceReport,
    TableMaintenance,
    maintained_tables,
    summary_lines,
)
from spark_apps.target.resolution import target_of


def test_maintenance_covers_the_stream_store_snapshots_and_audit_tables_and_no_view():
    tables = maintained_tables(target_of(Settings(), PIPELINE))
    assert {"stream.micro_batches", "batch.events_raw", "batch.merchant_revenue", "audit.alerts",
            "audit.reconciliation_ledger", "audit.serving_state"} <= set(tables)
    assert not set(tables) & set(PIPELINE.stream_table_names()), "every stream table is a view of the store"
    assert len(tables) == len(set(tables))


def test_maintenance_after_a_swap_keeps_the_store_of_the_generation_that_serves():
    """It once compacted the active generation's store but OPTIMIZEd, VACUUMed and checked the base one's."""
    tables = maintained_tables(target_of(Settings(), PIPELINE, "g2"))
    assert "stream.micro_batches__g2" in tables and "stream.micro_batches" not in tables


def test_the_report_is_one_line_per_table_and_check_and_fails_on_either():
    report = MaintenanceReport("marketplace", tables=[TableMaintenance("bronze.events_raw", 12, 1, 0, 3.25)],
                               checks=[Check(CHECKPOINT, True, "committed batch 4")])
    assert summary_lines(report) == [
        f"{'bronze.events_raw':36s} OK     files 12 -> 1, 0 vacuumed, 3.2s",
        f"{'check checkpoint':36s} OK     committed batch 4"]
    assert report.ok
    report.checks.append(Check("log retention", False, "partition 0 lost offsets [0,10)"))
    assert not report.ok
