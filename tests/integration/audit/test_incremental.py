"""The incremental audit against the real broker, Spark and Great Expectations: a run that extends a verified one
by the log's new records is exact, equals a full recompute, and still catches a stray write to a key the new
records never touched."""

from __future__ import annotations

import uuid

import pytest

from spark_apps.audit.auditor import audit
from spark_apps.audit.diff import EXTRA, MISMATCH, MISSING
from spark_apps.audit.ledger import FULL, INCREMENTAL, LEDGER_TABLE
from spark_apps.audit.recompute import align, read_stream_table, recompute, stream_tables
from spark_apps.io.catalog import table_path
from spark_apps.io.stream_store import read_view
from spark_apps.io.topics import admin_client
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.target.resolution import target_of
from tests.support.streams import fresh_stream_settings, produce_hard_cases, run_stream

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def extended(kafka_broker, spark, settings, tmp_path_factory):
    """A stream audited in full, then fed more records (every hard case again) and audited incrementally."""
    stream_settings = fresh_stream_settings(settings, tmp_path_factory.mktemp("incremental"),
                                            f"test.incremental.{uuid.uuid4().hex[:6]}", 2000)
    produce_hard_cases(stream_settings, total=600, seed=21)
    run_stream(spark, stream_settings)
    full = audit(spark, stream_settings, target_of(stream_settings, PIPELINE), kind=FULL)
    produce_hard_cases(stream_settings, total=300, seed=22)
    run_stream(spark, stream_settings)
    increment = audit(spark, stream_settings, target_of(stream_settings, PIPELINE), kind="auto")
    yield stream_settings, full, increment
    with admin_client(settings) as admin:
        admin.delete_topics([stream_settings.events_topic])


def test_an_audit_after_a_full_one_extends_it_by_the_new_records_and_is_exact(spark, extended):
    stream_settings, full, increment = extended
    assert full.success and increment.success, "\n".join(str(c) for c in increment.contract)
    assert (increment.kind, increment.builds_on) == (INCREMENTAL, full.run_id)
    assert increment.snapshot.records == increment.position.records > full.snapshot.records
    assert all(v.diff.matched > 0 for v in increment.verdicts if v.table.label.startswith(("bronze", "gold")))
    bronze = next(v for v in increment.verdicts if v.table.label.startswith("bronze"))
    assert bronze.diff.matched >= increment.position.records - full.position.records, "every new record compared"
    assert any(c.name.startswith("whole table gold.") and c.ok for c in increment.contract)
    rows = spark.read.format("delta").load(str(table_path(stream_settings, LEDGER_TABLE))) \
        .where(f"run_id = '{increment.run_id}'").collect()
    assert {(r.kind, r.builds_on) for r in rows} == {(INCREMENTAL, full.run_id)}


def test_an_incremental_audit_counts_every_reconciled_table_whole_on_both_sides(spark, extended):
    """The rows compared are only the scope's: every table's whole count, taken on both sides, covers the rest."""
    stream_settings, _, increment = extended
    versions = {v.table.stream: v.version for v in increment.verdicts}
    checks = {c.name: c for c in increment.contract}
    for table in stream_tables(target_of(stream_settings, PIPELINE)):
        check = checks[f"whole table {table.label}: stream rows = batch rows"]
        rows = read_stream_table(spark, stream_settings, target_of(stream_settings, PIPELINE), table, versions).count()
        assert check.ok and check.left == rows > 0, (table.label, check, rows)


def test_an_incremental_audit_without_new_records_writes_nothing_compares_only_what_the_stream_wrote_and_catches_it(
        spark, extended):
    """Two stray writes to the store: a changed gold row, found by its key, and a duplicate record deleted from
    bronze, which adds no row to compare and shows in bronze's whole count."""
    stream_settings, _, increment = extended

    def snapshot_heads() -> dict[str, int]:
        return {name: spark.sql(f"DESCRIBE HISTORY delta.`{table_path(stream_settings, name)}` LIMIT 1")
                .first().version for name in increment.snapshot.versions}

    heads_before = snapshot_heads()
    names = PIPELINE.tables()
    store = str(table_path(stream_settings, names.store))
    before = spark.sql(f"DESCRIBE HISTORY delta.`{store}` LIMIT 1").first().version
    target = target_of(stream_settings, PIPELINE)
    order = read_view(spark, stream_settings, target, names.gold("order_status")).where("paid_cents > 0") \
        .orderBy("order_id").first().order_id
    lost = read_view(spark, stream_settings, target, names.duplicates).orderBy("partition", "offset").first()
    try:
        spark.sql(f"UPDATE delta.`{store}` SET order_status__paid_cents = order_status__paid_cents + 1 "
                  f"WHERE _kind = 'gold.order_status' AND order_status__order_id = '{order}'")
        spark.sql(f"DELETE FROM delta.`{store}` WHERE _kind = 'record' AND partition = {lost.partition} "
                  f"AND offset = {lost.offset}")
        stray = audit(spark, stream_settings, target_of(stream_settings, PIPELINE), kind=INCREMENTAL)
    finally:
        spark.sql(f"RESTORE TABLE delta.`{store}` TO VERSION AS OF {before}")
    assert (stray.kind, stray.builds_on) == (INCREMENTAL, increment.run_id)
    assert stray.snapshot.records == increment.snapshot.records
    assert stray.snapshot.versions == increment.snapshot.versions, "no new record, so the verified snapshots stand"
    assert snapshot_heads() == heads_before, "nothing was written to the snapshots"
    verdict = next(v for v in stray.verdicts if v.table.label == "gold.order_status")
    assert not stray.success and not verdict.stream_equals_batch
    assert verdict.diff.counts[MISMATCH] == 1 and verdict.diff.counts[MISSING] == verdict.diff.counts[EXTRA] == 0
    samples = [s for e in verdict.gx.expectations if not e.success for s in e.samples]
    assert any(f"order_id={order}" in s for s in samples), samples
    whole = next(c for c in stray.contract if c.name.startswith("whole table bronze.events_raw"))
    assert (whole.left, whole.right) == (whole.right - 1, whole.right), whole
    reached = {"gold.order_status", "bronze.events_raw"}
    untouched = [v for v in stray.verdicts if v.table.label not in reached]
    assert untouched and all(v.success and v.diff.stream_rows == v.diff.batch_rows == 0 and not v.gx.expectations
                             and v.not_compared for v in untouched), "a table nothing reached is not compared"
    assert not verdict.not_compared
    assert untouched[0].not_compared in stray.report_path.read_text()


def test_the_extended_snapshots_equal_a_full_recompute_of_the_same_prefix(spark, extended):
    """Runs after the stray-write test, which builds on the fixture's incremental run: this recompute writes new
    versions of the ``batch.*`` snapshots, so no later run could."""
    stream_settings, _, increment = extended
    target = target_of(stream_settings, PIPELINE)
    again = recompute(spark, stream_settings, target, align(spark, stream_settings, target),
                      f"again-{uuid.uuid4().hex[:6]}")
    for table in stream_tables(target):
        path = str(table_path(stream_settings, table.snapshot))
        extended_rows, recomputed_rows = (
            spark.read.format("delta").option("versionAsOf", v).load(path)
            for v in (increment.snapshot.versions[table.snapshot], again.versions[table.snapshot]))
        assert extended_rows.count() == recomputed_rows.count() > 0 or table.label.endswith("dead_letters")
        assert extended_rows.exceptAll(recomputed_rows).isEmpty(), table.snapshot
        assert recomputed_rows.exceptAll(extended_rows).isEmpty(), table.snapshot
