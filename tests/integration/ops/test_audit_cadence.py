"""When the next audit is due is measured from the moment the last one stood for, not from when it started
(real Spark, a real append-only ledger)."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from spark_apps.audit import ledger
from spark_apps.io.catalog import ensure_table, table_path
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.ops.scheduled_audit import audit_due
from spark_apps.serving.state import KAPPA, last_audit_at
from spark_apps.target.resolution import target_of

pytestmark = pytest.mark.integration

EVERY_S = 6 * 3600
STOOD_FOR = dt.datetime(2026, 11, 24, 6, 0, tzinfo=dt.UTC)


def ledger_row(run_id: str, started_at: dt.datetime, as_of: dt.datetime) -> ledger.LedgerRow:
    return ledger.LedgerRow(
        run_id=run_id, pipeline=PIPELINE.name, table="gold.merchant_revenue", started_at=started_at,
        finished_at=started_at + dt.timedelta(minutes=2), stream_table="gold.merchant_revenue", stream_version=3,
        stream_app_id="app", stream_batch_id=7, topic="shop.events", start_offsets={0: 0}, end_offsets={0: 10},
        snapshot_table="batch.merchant_revenue", snapshot_version=1, stream_rows=1, batch_rows=1, matched=1,
        missing_in_stream=0, extra_in_stream=0, value_mismatch=0, buckets=1, differing_buckets=0,
        compare_seconds=0.1, stream_equals_batch=True, quality_ok=True, success=True, gx_result="", detail="",
        code_version="test", as_of=as_of)


@pytest.fixture
def cadence_settings(settings, tmp_path):
    return settings.with_overrides(warehouse_dir=tmp_path / "warehouse")


def test_a_late_scheduled_run_stands_for_its_interval_so_the_next_audit_is_due_on_time(spark, cadence_settings):
    """The 06:00 run started at 06:07; the 12:00 run must find the last audit 6 h old, not 5 h 53 min."""
    ledger.append(spark, cadence_settings, [ledger_row("late", STOOD_FOR + dt.timedelta(minutes=7), STOOD_FOR)])
    noon = STOOD_FOR + dt.timedelta(seconds=EVERY_S)
    last = last_audit_at(spark, cadence_settings, target_of(cadence_settings, PIPELINE), at_or_before=noon)
    assert last.timestamp() == STOOD_FOR.timestamp()
    gold = [PIPELINE.tables().gold(g.name) for g in PIPELINE.gold_tables]
    assert audit_due(dict.fromkeys(gold, KAPPA), gold, last, noon, EVERY_S).due


def test_a_ledger_from_before_as_of_gains_the_column_and_its_old_rows_stand_for_their_start(spark, cadence_settings):
    old_schema = ledger.LEDGER_SCHEMA.removesuffix(", as_of timestamp")
    old_row = {k: v for k, v in dataclasses.asdict(ledger_row("old", STOOD_FOR, STOOD_FOR)).items() if k != "as_of"}
    frame = spark.createDataFrame([old_row], old_schema)
    ensure_table(spark, cadence_settings, ledger.LEDGER_TABLE, frame.schema, properties={"delta.appendOnly": "true"})
    frame.write.format("delta").mode("append").save(str(table_path(cadence_settings, ledger.LEDGER_TABLE)))
    target = target_of(cadence_settings, PIPELINE)
    assert last_audit_at(spark, cadence_settings, target).timestamp() == STOOD_FOR.timestamp()

    later = STOOD_FOR + dt.timedelta(hours=6)
    ledger.append(spark, cadence_settings, [ledger_row("new", later + dt.timedelta(minutes=3), later)])
    assert last_audit_at(spark, cadence_settings, target).timestamp() == later.timestamp()
    assert last_audit_at(spark, cadence_settings, target,
                         at_or_before=later - dt.timedelta(seconds=1)).timestamp() == STOOD_FOR.timestamp()
