"""The Kappa layer end to end against the generator's ground truth (real broker, real Spark)."""

from __future__ import annotations

import shutil
import time
from collections import Counter

import pytest

from spark_apps.kafka_io import read_log_range
from spark_apps.lineage import batch_end_offsets, batch_start_offsets, committed_batches, position_at
from spark_apps.marketplace.generator import GeneratorConfig, Manifest, generate
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.producer import produce
from spark_apps.streaming import CheckpointMismatch, StreamFailed, StreamJob
from tests.expected import as_utc, merchant_revenue

pytestmark = pytest.mark.integration


def fresh_stream_settings(settings, home, topic_name: str, max_offsets: int):
    from spark_apps.topics import ensure_topic

    ensure_topic(settings, topic_name)
    return settings.with_overrides(events_topic=topic_name, warehouse_dir=home / "warehouse",
                                   checkpoint_root=home / "checkpoints", max_offsets_per_trigger=max_offsets)


@pytest.fixture(scope="module")
def streamed(kafka_broker, spark, settings, tmp_path_factory):
    """One stream run over every hard case, shared by the tests that only read its results."""
    stream_settings = fresh_stream_settings(settings, tmp_path_factory.mktemp("stream"), "test.stream.shared", 1100)
    manifest, values = produce_hard_cases(stream_settings)
    job = run_stream(spark, stream_settings)
    return job, manifest, values


def produce_hard_cases(settings, total=3000, seed=3) -> tuple[Manifest, dict]:
    config = GeneratorConfig(seed=seed, total_events=total, base_time_ms=int(time.time()) * 1000,
                             allowed_lateness_s=settings.allowed_lateness_s, late_rate=0.03,
                             malformed_rate=0.03, duplicate_rate=0.04, conflict_rate=0.01,
                             payment_before_order_rate=0.05, merchants=12, customers=300)
    result = produce(settings, config, show_progress=False)
    values = {r.seq: r.value for r in generate(config)}
    return result.manifest, values


def run_stream(spark, settings, fault: str = "") -> StreamJob:
    job = StreamJob(spark, settings.with_overrides(fault_inject=fault), PIPELINE)
    job.run(until_caught_up=True)
    return job


def assert_tables_match_manifest(spark, job: StreamJob, manifest: Manifest, values: dict) -> None:
    t = job.tables
    table = lambda name: spark.read.format("delta").load(job.path(name))  # noqa: E731

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

    expected = merchant_revenue(manifest.valid_events, job.settings.window_s)
    gold = {(r.merchant_id, as_utc(r.window_start), r.currency):
            {"orders": r.orders, "gross_cents": r.gross_cents, "refunds_cents": r.refunds_cents,
             "net_cents": r.net_cents, "distinct_customers": r.distinct_customers}
            for r in table(t.gold("merchant_revenue")).collect()}
    assert gold == expected


def test_stream_output_equals_the_ground_truth_of_every_hard_case(spark, streamed):
    job, manifest, values = streamed
    assert len(job.stats) >= 3, "maxOffsetsPerTrigger splits the log into several micro-batches"
    assert_tables_match_manifest(spark, job, manifest, values)


def test_exactly_once_when_the_job_dies_at_every_point_of_a_micro_batch(spark, settings, kafka_broker, tmp_path):
    stream_settings = fresh_stream_settings(settings, tmp_path, "test.stream.faults", 1100)
    manifest, values = produce_hard_cases(stream_settings, seed=4)
    for stage, batch_id in (("after_bronze", 0), ("after_candidates", 0), ("after_silver", 1), ("after_gold", 1),
                            ("before_checkpoint_commit", 2)):
        with pytest.raises(StreamFailed) as failed:
            run_stream(spark, stream_settings, fault=f"{stage}@{batch_id}")
        assert f"injected fault {stage} in batch {batch_id}" in failed.value.detail
    job = run_stream(spark, stream_settings)
    assert_tables_match_manifest(spark, job, manifest, values)


def test_replaying_a_committed_micro_batch_changes_nothing(spark, streamed):
    job, manifest, values = streamed
    stream_settings = job.settings
    tables = [job.tables.bronze, job.tables.dead_letters, job.tables.candidates, job.tables.events,
              job.tables.duplicates, job.tables.late_events, job.tables.gold("merchant_revenue")]
    before = {t: (spark.sql(f"DESCRIBE HISTORY delta.`{job.path(t)}`").first().version,
                  sorted(map(tuple, spark.read.format("delta").load(job.path(t)).drop("value", "key").collect())))
              for t in tables}
    for batch_id in (0, 1):
        start = batch_start_offsets(job.checkpoint, batch_id, job.topic)
        end = batch_end_offsets(job.checkpoint, batch_id, job.topic)
        job.process_batch(read_log_range(spark, stream_settings, job.topic, start, end), batch_id)
    after = {t: (spark.sql(f"DESCRIBE HISTORY delta.`{job.path(t)}`").first().version,
                 sorted(map(tuple, spark.read.format("delta").load(job.path(t)).drop("value", "key").collect())))
             for t in tables}
    assert after == before
    assert_tables_match_manifest(spark, job, manifest, values)


def test_every_table_version_records_the_offsets_it_reflects(spark, streamed):
    job, _, _ = streamed
    bronze_path = job.path(job.tables.bronze)
    for batch_id in committed_batches(job.checkpoint):
        end = batch_end_offsets(job.checkpoint, batch_id, job.topic)
        versions = [r.version for r in spark.sql(f"DESCRIBE HISTORY delta.`{bronze_path}`").collect()
                    if r.userMetadata and f'"batch_id":{batch_id},' in r.userMetadata]
        assert len(versions) == 1
        position = position_at(spark, bronze_path, versions[0])
        assert position.batch_id == batch_id and position.end_offsets == end
        consumed = spark.read.format("delta").option("versionAsOf", versions[0]).load(bronze_path)
        per_partition = {r.partition: r["max(offset)"] + 1 for r in consumed.groupBy("partition").max("offset")
                         .collect()}
        assert per_partition == {p: o for p, o in end.items() if o > 0}
    gold = position_at(spark, job.path(job.tables.gold("merchant_revenue")))
    assert gold.end_offsets == batch_end_offsets(job.checkpoint, committed_batches(job.checkpoint)[-1], job.topic)


def test_a_deleted_checkpoint_with_kept_tables_is_refused(spark, streamed, tmp_path):
    job, _, _ = streamed
    bronze_rows = spark.read.format("delta").load(job.path(job.tables.bronze)).count()
    kept = tmp_path / "checkpoint-backup"
    shutil.move(job.checkpoint, kept)
    try:
        with pytest.raises(CheckpointMismatch, match="checkpoint .* is missing but .* records batches"):
            StreamJob(spark, job.settings, PIPELINE).prepare()
        assert not job.checkpoint.exists(), "a refused start must not leave a fresh checkpoint behind"
        assert spark.read.format("delta").load(job.path(job.tables.bronze)).count() == bronze_rows
    finally:
        shutil.move(kept, job.checkpoint)


def test_a_checkpoint_of_another_run_is_refused(spark, streamed):
    job, _, _ = streamed
    app_file = job.checkpoint / "kappa_app_id"
    original = app_file.read_text()
    app_file.write_text("kappa-marketplace-someone-else\n")
    try:
        with pytest.raises(CheckpointMismatch, match="a reset checkpoint would skip data"):
            StreamJob(spark, job.settings, PIPELINE).prepare()
    finally:
        app_file.write_text(original)
