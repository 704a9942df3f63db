"""The heartbeat a supervisor reads, written from a stand-in for Spark's query handle."""

import json
import time
from types import SimpleNamespace

from spark_apps.stream.job import MicroBatchStats, write_heartbeat


def test_a_heartbeat_naming_a_batch_carries_that_batch_offsets_before_spark_reports_its_progress(tmp_path):
    query = SimpleNamespace(lastProgress=None, isActive=True)  # the batch ended; Spark's report has not landed
    stats = [MicroBatchStats(0, 400, 0, 2.5, {}, {0: 130, 1: 270})]
    write_heartbeat(tmp_path / "beat.json", query, stats, "events", 900)
    beat = json.loads((tmp_path / "beat.json").read_text())
    assert beat["last_batch_id"] == 0 and beat["last_batch_records"] == 400
    assert beat["end_offsets"] == {"events": {"0": 130, "1": 270}}


def test_before_any_batch_the_heartbeat_reports_spark_progress_offsets_as_numbers(tmp_path):
    progress = {"sources": [{"endOffset": '{"events": {"0": 5}}', "latestOffset": '{"events": {"0": 9}}',
                             "metrics": {"maxOffsetsBehindLatest": "4"}}]}
    write_heartbeat(tmp_path / "beat.json", SimpleNamespace(lastProgress=progress, isActive=True), [], "events", 900)
    beat = json.loads((tmp_path / "beat.json").read_text())
    assert beat["last_batch_id"] is None
    assert beat["end_offsets"] == {"events": {"0": 5}} and beat["latest_offsets"] == {"events": {"0": 9}}


def test_the_heartbeat_counts_records_dead_letters_and_future_events_of_the_batches_within_its_window(tmp_path):
    now = time.time()
    stats = [MicroBatchStats(0, 1000, 900, 1.0, {}, {0: 1000}, finished_at_s=now - 1000, future_events=7),
             MicroBatchStats(1, 300, 20, 1.0, {}, {0: 1300}, finished_at_s=now - 100, future_events=2),
             MicroBatchStats(2, 200, 10, 1.0, {}, {0: 1500}, finished_at_s=now - 5)]
    write_heartbeat(tmp_path / "beat.json", SimpleNamespace(lastProgress=None, isActive=True), stats, "events", 900,
                    topic_id="id-a", generation="g2")
    beat = json.loads((tmp_path / "beat.json").read_text())
    assert beat["window"] == {"seconds": 900, "records": 500, "dead_letters": 30, "future_events": 2}, \
        "batch 0 ended before the window"
    assert (beat["topic_id"], beat["generation"]) == ("id-a", "g2")

