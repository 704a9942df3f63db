"""The Kappa layer end to end against the generator's ground truth (real broker, real Spark)."""

from __future__ import annotations

import datetime as dt
import shutil
from collections import Counter

import pytest

from spark_apps.io.catalog import table_path
from spark_apps.io.lineage import batch_end_offsets, batch_start_offsets, committed_batches, position_at
from spark_apps.io.log_identity import SOURCE_FILE, LogRewound, record_source, recorded_source
from spark_apps.io.log_reader import read_log_range
from spark_apps.io.topics import describe_log
from spark_apps.marketplace.generator import Manifest
from spark_apps.marketplace.pipeline import PIPELINE, SESSION_GAP_S, WINDOW_S
from spark_apps.stream.job import STREAM_SESSION_CONF, CheckpointMismatch, StreamJob
from spark_apps.target.resolution import target_of
from tests.support.expected import as_utc, customer_sessions, merchant_revenue, order_status
from tests.support.streams import FAULTS, read_stream_table

pytestmark = pytest.mark.integration


def assert_tables_match_manifest(spark, job: StreamJob, manifest: Manifest, values: dict) -> None:
    t = job.tables
    table = lambda name: read_stream_table(spark, job.settings, name)  # noqa: E731

    bronze = table(t.bronze).select("topic", "partition", "offset").collect()
    assert len(bronze) == manifest.total_records, "bronze: every record exactly once"
    assert len(set(bronze)) == len(bronze), "bronze: no duplicated coordinates"

    dead = Counter((bytes(r.value), r.reason) for r in table(t.dead_letters).collect())
    assert dead == Counter((values[seq], reason) for seq, reason in manifest.malformed.items())

    candidates = table(t.candidates).count()
    assert candidates + sum(dead.values()) == manifest.total_records, "bronze = candidates + dead letters"

    events = {r.event_id: r for r in table(t.events).collect()}
    assert set(events) == set(manifest.valid_events) | set(manifest.late_events)
    for event_id, payload in (manifest.valid_events | manifest.late_events).items():
        row = events[event_id]
        assert (row.amount_cents, row.merchant_id, row.event_type) == \
            (payload["amount_cents"], payload["merchant_id"], payload["event_type"])
    assert {r.event_id for r in table(t.late_events).collect()} == set(manifest.late_events)
    assert {e for e, r in events.items() if r.is_late} == set(manifest.late_events)

    kinds = Counter(r.kind for r in table(t.duplicates).collect())
    assert kinds == Counter({"duplicate": len(manifest.duplicates), "conflict": len(manifest.conflicts)})

    expected = merchant_revenue(manifest.valid_events, WINDOW_S)
    gold = {(r.merchant_id, as_utc(r.window_start), r.currency):
            {"orders": r.orders, "gross_cents": r.gross_cents, "refunds_cents": r.refunds_cents,
             "net_cents": r.net_cents, "distinct_customers": r.distinct_customers}
            for r in table(t.gold("merchant_revenue")).collect()}
    assert gold == expected

    statuses = {r.order_id: other_values(r, "order_id") for r in table(t.gold("order_status")).collect()}
    assert statuses == order_status(manifest.valid_events)

    sessions = {(r.customer_id, as_utc(r.session_start)): other_values(r, "customer_id", "session_start")
                for r in table(t.gold("customer_sessions")).collect()}
    assert sessions == customer_sessions(manifest.valid_events, SESSION_GAP_S)


def other_values(row, *keys: str) -> dict:
    """A row's non-key columns, timestamps as aware UTC like the ground truth's."""
    return {name: as_utc(value) if isinstance(value, dt.datetime) else value
            for name, value in row.asDict().items() if name not in keys}


def test_exactly_once_when_the_job_dies_at_every_point_of_a_micro_batch(spark, restarted_stream):
    """The shared stream was killed at every stage of foreachBatch, then restarted (tests/integration/conftest)."""
    job, manifest, values = restarted_stream.job, restarted_stream.manifest, restarted_stream.values
    assert [(stage, batch) for stage, batch, _ in restarted_stream.failures] == list(FAULTS)
    for stage, batch_id, detail in restarted_stream.failures:
        assert f"injected fault {stage} in batch {batch_id}" in detail
    assert len(committed_batches(job.checkpoint)) >= 3, "maxOffsetsPerTrigger splits the log into micro-batches"
    assert_tables_match_manifest(spark, job, manifest, values)
    assert all(spark.conf.get(key) != value for key, value in STREAM_SESSION_CONF.items()), \
        "only the stream's own session takes the stream's settings"


def test_replaying_a_committed_micro_batch_changes_nothing(spark, restarted_stream):
    job, manifest, values = restarted_stream.job, restarted_stream.manifest, restarted_stream.values
    stream_settings = job.settings
    tables = PIPELINE.stream_table_names()

    def state():
        version = spark.sql(f"DESCRIBE HISTORY delta.`{job.store}` LIMIT 1").first().version
        return version, {t: sorted(map(tuple, read_stream_table(spark, stream_settings, t)
                                       .drop("value", "key").collect())) for t in tables}

    before = state()
    for batch_id in (0, 1):
        start = batch_start_offsets(job.checkpoint, batch_id, job.topic)
        end = batch_end_offsets(job.checkpoint, batch_id, job.topic)
        job.process_batch(read_log_range(spark, stream_settings, job.topic, start, end), batch_id)
    assert [(s.batch_id, s.records, s.stage_seconds) for s in job.stats[-2:]] == [(0, 0, {}), (1, 0, {})], \
        "a batch the store records is not redone"
    assert state() == before
    assert_tables_match_manifest(spark, job, manifest, values)


def test_every_store_version_records_the_offsets_it_reflects(spark, restarted_stream):
    job = restarted_stream.job
    history = spark.sql(f"DESCRIBE HISTORY delta.`{job.store}`").collect()
    for batch_id in committed_batches(job.checkpoint):
        end = batch_end_offsets(job.checkpoint, batch_id, job.topic)
        versions = [r.version for r in history if r.userMetadata and f'"batch_id":{batch_id},' in r.userMetadata]
        assert len(versions) == 1, "one commit per micro-batch, kept once however often the batch was replayed"
        position = position_at(table_path(job.settings, job.tables.store), versions[0])
        assert position.batch_id == batch_id and position.end_offsets == end
        consumed = read_stream_table(spark, job.settings, job.tables.bronze, version=versions[0])
        per_partition = {r.partition: r["max(offset)"] + 1 for r in consumed.groupBy("partition").max("offset")
                         .collect()}
        assert per_partition == {p: o for p, o in end.items() if o > 0}
    assert position_at(table_path(job.settings, job.tables.store)).end_offsets == \
        batch_end_offsets(job.checkpoint, committed_batches(job.checkpoint)[-1], job.topic)


def test_every_micro_batch_appends_to_the_store_and_never_rewrites_a_file(spark, restarted_stream):
    """Every table is a view of the store, so a batch is one append: bronze, silver and gold move together and no
    MERGE rewrites a file. Delta writes its state checkpoint every 100 commits, not every 10."""
    job = restarted_stream.job
    history = spark.sql(f"DESCRIBE HISTORY delta.`{job.store}`").collect()
    batches = [r for r in history if r.userMetadata and '"batch_id"' in r.userMetadata]
    assert {r.operation for r in batches} == {"WRITE"}
    assert {r.operationParameters["mode"] for r in batches} == {"Append"}
    properties = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{job.store}`").collect()}
    assert properties["delta.checkpointInterval"] == "100"


def test_a_deleted_checkpoint_with_kept_tables_is_refused(spark, restarted_stream, tmp_path):
    job = restarted_stream.job
    bronze_rows = read_stream_table(spark, job.settings, job.tables.bronze).count()
    kept = tmp_path / "checkpoint-backup"
    shutil.move(job.checkpoint, kept)
    try:
        with pytest.raises(CheckpointMismatch, match="the checkpoint is missing but the tables record batches"):
            StreamJob(spark, job.settings, target_of(job.settings, PIPELINE)).prepare()
        assert not job.checkpoint.exists(), "a refused start must not leave a fresh checkpoint behind"
        assert read_stream_table(spark, job.settings, job.tables.bronze).count() == bronze_rows
    finally:
        shutil.move(kept, job.checkpoint)


def test_a_checkpoint_of_another_run_is_refused(spark, restarted_stream):
    job = restarted_stream.job
    app_file = job.checkpoint / "kappa_app_id"
    original = app_file.read_text()
    app_file.write_text("kappa-marketplace-someone-else\n")
    try:
        with pytest.raises(CheckpointMismatch, match="a reset checkpoint would skip data"):
            StreamJob(spark, job.settings, target_of(job.settings, PIPELINE)).prepare()
    finally:
        app_file.write_text(original)


def test_a_topic_recreated_under_the_stream_is_refused_before_a_record_is_read(spark, restarted_stream):
    job = restarted_stream.job
    source = job.checkpoint / SOURCE_FILE
    original = source.read_text()
    assert recorded_source(job.checkpoint) == {"topic": job.topic, "topic_id": describe_log(job.settings).topic_id}
    record_source(job.checkpoint, job.topic, "11111111-2222-3333-4444-555555555555")
    commits = read_stream_table(spark, job.settings, job.tables.commits).count()
    try:
        with pytest.raises(LogRewound, match=f"topic {job.topic} has id .* but the stream read the topic with id "
                                             "11111111-2222-3333-4444-555555555555: it was deleted and recreated"):
            StreamJob(spark, job.settings, target_of(job.settings, PIPELINE)).prepare()
        assert read_stream_table(spark, job.settings, job.tables.commits).count() == commits
    finally:
        source.write_text(original)
