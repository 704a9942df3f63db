"""Compaction of the stream's store against a real stream (real broker, real Spark): it never changes what a view
returns, killed half way or not, and the stream goes on over it exactly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from pyspark.testing import assertDataFrameEqual

from spark_apps.core.settings import PROJECT_ROOT
from spark_apps.core.waiting import poll
from spark_apps.io import delta_log, delta_snapshot, stream_store
from spark_apps.io.catalog import table_path
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.stream.compaction import compact, tails_by_query, tails_of
from spark_apps.target.resolution import target_of
from spark_apps.transforms.store import COMPACTION, EPOCH, KIND, gold_kind, gold_rows
from tests.support.streams import fresh_stream_settings, produce_hard_cases, read_stream_table, run_stream
from tests.support.topics import delete_topics

pytestmark = pytest.mark.integration
TABLES = PIPELINE.tables()


@pytest.fixture(scope="module")
def streamed(kafka_broker, spark, settings, tmp_path_factory):
    """The hard cases streamed in batches of at most 200 records, epochs of two batches: several finished epochs,
    left to the compaction these tests run (the stream does not compact its own store here)."""
    topic = f"test.compaction.{uuid.uuid4().hex[:8]}"
    local = fresh_stream_settings(settings, tmp_path_factory.mktemp("compaction"), topic, max_offsets=200) \
        .with_overrides(compaction_epoch_batches=2, compaction_in_stream=False)
    produce_hard_cases(local, total=1200, seed=5)
    run_stream(spark, local)
    yield local
    delete_topics(settings, [topic])


def views(spark, settings) -> dict[str, object]:
    """Every view of the store, read now and kept (a later read of the store sees later versions)."""
    return {name: read_stream_table(spark, settings, name).localCheckpoint(eager=True)
            for name in PIPELINE.stream_table_names()}


def assert_same_views(spark, settings, before: dict[str, object]) -> None:
    for name, rows in views(spark, settings).items():
        assertDataFrameEqual(rows, before[name], checkRowOrder=False)


def compactions_since(settings, version: int) -> list[dict]:
    store = table_path(settings, TABLES.store)
    return [c.meta[COMPACTION] for c in delta_log.commits(store) if c.version > version and COMPACTION in c.meta]


def gold_rows_stored(spark, settings) -> dict[str, int]:
    store = stream_store.relation(settings, target_of(settings, PIPELINE))
    return {r[KIND]: r["rows"] for r in spark.sql(f"SELECT {KIND}, count(*) AS rows FROM {store} "
                                                   f"WHERE {KIND} LIKE 'gold.%' GROUP BY {KIND}").collect()}


def test_the_stores_log_counts_every_tail_as_a_query_over_its_files_does(spark, streamed):
    location = table_path(streamed, TABLES.store)
    version = delta_log.latest_version(location)
    relation = stream_store.relation(streamed, target_of(streamed, PIPELINE), version)
    through = version  # past every epoch
    from_log = tails_of(delta_snapshot.file_stats(location, version), through)
    assert set(from_log) == {gold_kind(g.name) for g in PIPELINE.gold_tables}
    assert from_log == tails_by_query(spark, relation, through)


def test_the_store_keeps_statistics_of_the_batch_and_of_the_columns_reads_skip_by_only(spark, streamed):
    location = table_path(streamed, TABLES.store)
    kept = set(stream_store.stats_columns(PIPELINE, stream_store.stored_layout(spark, streamed,
                                                                                 target_of(streamed, PIPELINE))))
    assert {"_batch_id", "offset", "event_id", "order_status__order_id"} <= kept and len(kept) < 20, kept
    files = delta_snapshot.file_stats(location, delta_log.latest_version(location))
    assert files and all(set(f.max_values) <= kept and "_batch_id" in f.max_values for f in files
                         if f.records), [f.max_values for f in files][:3]


def gold_files_since(settings, started: float) -> list[Path]:
    """Data files of the store's gold partitions written after ``started`` (a time of ``time.time()``)."""
    store = table_path(settings, TABLES.store)
    return [p for p in store.glob("_kind=gold.*/*/*.parquet") if p.stat().st_mtime >= started]


def test_compaction_killed_half_way_or_finished_leaves_every_view_as_it_was(spark, streamed):
    local = streamed
    before, stored_before = views(spark, local), gold_rows_stored(spark, local)
    version = stream_store.latest_version(local, target_of(local, PIPELINE))
    started = time.time()
    compacting = subprocess.Popen([sys.executable, "-m", "spark_apps.cli", "compact"], cwd=PROJECT_ROOT,
                                  env={**os.environ, **local.as_env()}, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
    try:
        first = poll(lambda: gold_files_since(local, started) or compacting.poll() is not None, timeout_s=300,
                     every_s=0.02)
        compacting.send_signal(signal.SIGKILL)
    finally:
        compacting.kill()
        _, err = compacting.communicate(timeout=60)
    assert first and compacting.returncode == -signal.SIGKILL, err[-2000:]
    half = compactions_since(local, version)
    assert len(half) <= 1, f"one commit for every table of a run, or none: {half}"
    assert_same_views(spark, local, before)

    done = compact(spark, local, target_of(local, PIPELINE))
    assert {c.table for c in done} | {TABLES.gold(t) for c in half for t in c["tables"]} == \
        {TABLES.gold(g.name) for g in PIPELINE.gold_tables}
    assert_same_views(spark, local, before)
    stored_after = gold_rows_stored(spark, local)
    assert all(stored_after[gold_kind(g.name)] < stored_before[gold_kind(g.name)] for g in PIPELINE.gold_tables), \
        (stored_before, stored_after)
    newest = delta_log.latest_version(table_path(local, TABLES.store))
    assert all(min(c["tables"].values()) >= 0 and c["read_version"] >= version
               for c in compactions_since(local, version))
    assert compact(spark, local, target_of(local, PIPELINE)) == [], \
        f"nothing more to fold until the stream adds an epoch ({newest})"


def live_gold_files(settings) -> dict[str, dict[int, set[str]]]:
    """The store's live gold files now, by kind and epoch, from its log."""
    location = table_path(settings, TABLES.store)
    found: dict[str, dict[int, set[str]]] = {}
    for file in delta_snapshot.file_stats(location, delta_log.latest_version(location)):
        if file.partition[KIND].startswith("gold."):
            found.setdefault(file.partition[KIND], {}).setdefault(int(file.partition[EPOCH]), set()).add(file.path)
    return found


def test_the_stream_goes_on_over_a_compacted_store_and_gold_stays_the_fold_of_every_event(spark, streamed):
    """A base, then the new epochs folded into runs of their own beside it (the base not rewritten, every view as it
    was), then all of it folded into one: gold is the fold of every event throughout."""
    local = streamed
    target = target_of(local, PIPELINE)
    compact(spark, local, target)
    produce_hard_cases(local, total=600, seed=6)
    run_stream(spark, local)
    before, files = views(spark, local), live_gold_files(local)
    runs = compact(spark, local, target, tail_ratio=1000.0)
    assert runs, "the new batches finished epochs to fold"
    assert_same_views(spark, local, before)
    after = live_gold_files(local)
    for run in runs:
        kind = gold_kind(run.table.split(".", 1)[1])
        base = min(files[kind])
        assert run.from_epoch > base and after[kind][base] == files[kind][base], (run, files[kind], after[kind])
        assert len(after[kind][run.through_epoch]) == 1, after[kind]
    assert compact(spark, local, target), "a ratio of 0 folds the base and its runs into one"
    assert_same_views(spark, local, before)
    on_time = read_stream_table(spark, local, TABLES.events).where("NOT is_late")
    for gold in PIPELINE.gold_tables:
        expected = gold_rows(gold, on_time, local)
        assertDataFrameEqual(read_stream_table(spark, local, TABLES.gold(gold.name)), expected, checkRowOrder=False)


def test_the_stream_compacts_its_own_store_as_epochs_end_and_gold_stays_the_fold_of_every_event(
        spark, streamed, tmp_path):
    own = fresh_stream_settings(streamed, tmp_path, streamed.events_topic, max_offsets=200) \
        .with_overrides(compaction_epoch_batches=1, compaction_in_stream=True)
    job = run_stream(spark, own)
    assert job.compaction.done, "epochs of one batch each: the stream compacted while it ran"
    assert job.compaction.niceness == own.compaction_nice, "compaction runs in a process of the lowest priority"
    assert job.compaction.process.poll() is not None, "the compaction process ends with the stream"
    store = table_path(own, TABLES.store)
    by_stream = [c.meta[COMPACTION] for c in delta_log.commits(store) if COMPACTION in c.meta]
    assert sum(len(c["tables"]) for c in by_stream) == len(job.compaction.done), by_stream
    assert all(0 <= c["through_epoch"] < len(job.stats) - 1 for c in by_stream), by_stream
    on_time = read_stream_table(spark, own, TABLES.events).where("NOT is_late")
    for gold in PIPELINE.gold_tables:
        expected = gold_rows(gold, on_time, own)
        assertDataFrameEqual(read_stream_table(spark, own, TABLES.gold(gold.name)), expected, checkRowOrder=False)
