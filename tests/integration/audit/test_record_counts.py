"""The record-count contract of an audit, from the counts it took: pure arithmetic, and one small Spark frame."""

import pytest

from spark_apps.audit.auditor import _contract
from spark_apps.audit.recompute import Snapshot, stream_tables
from spark_apps.core.settings import Settings
from spark_apps.io.lineage import StreamPosition
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.target.resolution import target_of
from spark_apps.transforms.store import RECORD_COUNTS, record_counts

pytestmark = pytest.mark.integration

TARGET = target_of(Settings(), PIPELINE)
POSITION = StreamPosition(table_version=0, app_id="app", batch_id=0, topic="t", start_offsets={0: 0},
                          end_offsets={0: 100})
# 100 records: 10 dead letters, 90 candidates, of which 80 won their ids (6 of them late) and 10 are duplicates.
TALLY = {"records": 100, "dead_letters": 10, "candidates": 90, "events": 80, "duplicates": 10, "late_events": 6}


def counts(stream: dict | None = None, batch: dict | None = None, whole: dict | None = None) -> dict:
    return ({("stream", k): v for k, v in (TALLY | (stream or {})).items()}
            | {("batch", k): v for k, v in (TALLY | (batch or {})).items()} | (whole or {}))


def broken(found: dict, whole: bool = False) -> list[str]:
    return [c.name for c in _contract(TARGET, Snapshot("run", POSITION, "v", records=100), found, whole)
            if not c.ok]


def test_every_record_accounted_for_on_both_sides_holds_the_contract():
    assert broken(counts()) == []


def test_a_record_missing_from_the_stream_or_the_batch_breaks_its_equation():
    assert broken(counts(stream={"records": 99, "candidates": 89, "events": 79})) == [
        "log records in [start, O) = stream bronze rows"]
    assert broken(counts(batch={"candidates": 89})) == ["log records = batch candidates + batch dead letters"]


def test_a_candidate_neither_winner_nor_duplicate_breaks_the_dedup_equation_and_late_events_are_compared():
    assert broken(counts(stream={"duplicates": 9})) == ["silver candidates = silver events + duplicates"]
    assert broken(counts(batch={"late_events": 5})) == ["stream late events = batch late events"]


def test_an_incremental_run_also_compares_every_reconciled_tables_whole_row_count():
    tables = [t.stream for t in stream_tables(TARGET)]
    even = {(side, name): 7 for name in tables for side in ("stream", "batch")}
    assert broken(counts(whole=even), whole=True) == []
    short = even | {("stream", PIPELINE.tables().gold("order_status")): 6}
    assert broken(counts(whole=short), whole=True) == ["whole table gold.order_status: stream rows = batch rows"]


def test_record_counts_split_bronze_by_reason_winner_and_lateness(spark):
    rows = [(None, True, False), (None, True, True), (None, False, False), ("malformed_json", None, None)]
    bronze = spark.createDataFrame(rows, "dead_letter_reason string, is_winner boolean, is_late boolean")
    assert set(RECORD_COUNTS) == {"records", "dead_letters", "candidates", "events", "duplicates", "late_events"}
    assert record_counts(bronze).first().asDict() == {"records": 4, "dead_letters": 1, "candidates": 3, "events": 2,
                                                      "duplicates": 1, "late_events": 1}
