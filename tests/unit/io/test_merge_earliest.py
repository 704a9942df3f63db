"""The stream's MERGE into silver.events: per event id the record earliest in the log wins, batch after batch; a
batch finds its own commit and whether it replaced a winner."""

import uuid

import pytest
from pyspark.testing import assertDataFrameEqual

from spark_apps.io.delta_writes import batch_commit, commit_metadata, merge_earliest
from spark_apps.io.key_sets import key_set
from spark_apps.transforms.events import earlier_in_log

SCHEMA = "event_id string, partition int, offset long, payload string"
EARLIER = earlier_in_log("s", "t")


@pytest.fixture
def events(spark, tmp_path):
    path = str(tmp_path / f"events-{uuid.uuid4().hex[:8]}")
    spark.sql(f"CREATE TABLE delta.`{path}` ({SCHEMA}) USING delta")
    return path


def merge(spark, path, rows, batch_id, app_id="app"):
    frame = spark.createDataFrame(rows, SCHEMA)
    ids = key_set(frame.select("event_id"), ("event_id",), in_driver=True)
    with commit_metadata(spark, {"app_id": app_id, "batch_id": batch_id}):
        return merge_earliest(spark, path, ids, frame, EARLIER, app_id, batch_id)


def test_the_earliest_record_of_each_id_wins_across_batches_and_a_replay_changes_nothing(spark, events):
    merge(spark, events, [("e1", 1, 5, "first-seen"), ("e2", 0, 1, "x")], 0)
    merge(spark, events, [("e1", 0, 9, "lower-partition"), ("e2", 0, 4, "later"), ("e3", 2, 0, "new")], 1)
    merge(spark, events, [("e1", 1, 2, "replayed-batch-is-skipped")], 1)
    assertDataFrameEqual(spark.read.format("delta").load(events), spark.createDataFrame(
        [("e1", 0, 9, "lower-partition"), ("e2", 0, 1, "x"), ("e3", 2, 0, "new")], SCHEMA))


def test_a_batch_finds_its_own_commit_and_whether_it_replaced_a_winner(spark, events):
    merge(spark, events, [("e1", 1, 5, "a"), ("e2", 0, 1, "b")], 0)
    merge(spark, events, [("e2", 0, 7, "later")], 1)
    merge(spark, events, [("e1", 0, 3, "earlier")], 2)
    first, later, earlier = (batch_commit(events, "app", b) for b in (0, 1, 2))
    assert (first.version, later.version, earlier.version) == (1, 2, 3)
    assert int(first.metrics["numTargetRowsInserted"]) == 2
    assert int(later.metrics.get("numTargetRowsUpdated") or 0) == 0, "a later record replaces nothing"
    assert int(earlier.metrics["numTargetRowsUpdated"]) == 1
    before = spark.read.format("delta").option("versionAsOf", earlier.version - 1).load(events)
    assert before.where("event_id = 'e1'").first()["payload"] == "a", "the version before holds the replaced row"
    assert batch_commit(events, "app", 3) is None
    assert batch_commit(events, "other-app", 0) is None


def test_the_merge_says_how_many_winners_it_replaced_and_a_skipped_replay_says_it_cannot_tell(spark, events):
    assert merge(spark, events, [("e1", 1, 5, "a"), ("e2", 0, 1, "b")], 0) == 0
    assert merge(spark, events, [("e2", 0, 7, "later")], 1) == 0, "a later record replaces nothing"
    assert merge(spark, events, [("e1", 0, 3, "earlier")], 2) == 1
    assert merge(spark, events, [("e1", 0, 3, "earlier")], 2) is None, "a replayed batch: only its commit knows"
