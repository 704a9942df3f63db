"""The record-count contract of an audit, from the counts it took: pure arithmetic, no Spark."""

from spark_apps.audit.recompute import Snapshot, stream_tables
from spark_apps.audit.run import _contract
from spark_apps.io.lineage import StreamPosition
from spark_apps.marketplace.pipeline import PIPELINE

NAMES = PIPELINE.tables()
POSITION = StreamPosition(table_version=0, app_id="app", batch_id=0, topic="t", start_offsets={0: 0},
                          end_offsets={0: 100})


def counts(duplicates_outside: int) -> dict[tuple[str, str], int]:
    """An incremental run's counts: 100 records, 10 dead, 90 candidates of which 80 won; every table's batch side."""
    written = {NAMES.bronze: 100, NAMES.dead_letters: 10, NAMES.candidates: 90, NAMES.events: 80}
    taken = {("stream", t.stream): written.get(t.stream, 5) for t in stream_tables(PIPELINE) if not t.derived}
    batch = {("batch", t.stream): written.get(t.stream, 5) for t in stream_tables(PIPELINE)}
    return taken | batch | {("batch", NAMES.duplicates): 10, ("batch", NAMES.late_events): 6,
                            ("outside", NAMES.duplicates): duplicates_outside, ("outside", NAMES.late_events): 4}


def test_an_incremental_run_counts_a_view_as_its_verified_rows_outside_the_scope_plus_the_diffs_count_inside():
    in_scope = {t.stream: 1 for t in stream_tables(PIPELINE)} | {NAMES.duplicates: 3, NAMES.late_events: 2}
    checks = {c.name: c for c in _contract(PIPELINE, "", Snapshot("run", POSITION, "v", records=100), counts(7),
                                           in_scope)}
    assert all(c.ok for c in checks.values()), [c for c in checks.values() if not c.ok]
    assert (checks["whole table silver.duplicates: stream rows = batch rows"].left,
            checks["whole table silver.late_events: stream rows = batch rows"].left) == (10, 6)
    assert checks["silver candidates = silver events + duplicates"].right == 90


def test_a_view_short_of_rows_outside_the_scope_breaks_its_whole_count_and_the_dedup_equation():
    in_scope = {t.stream: 1 for t in stream_tables(PIPELINE)} | {NAMES.duplicates: 3, NAMES.late_events: 2}
    broken = [c.name for c in _contract(PIPELINE, "", Snapshot("run", POSITION, "v", records=100), counts(6),
                                        in_scope) if not c.ok]
    assert broken == ["silver candidates = silver events + duplicates",
                      "whole table silver.duplicates: stream rows = batch rows"]
