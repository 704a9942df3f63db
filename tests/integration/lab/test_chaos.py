"""The bounded chaos subset of `make test` (`make chaos` runs every scenario in full, 20 kills and more).

One story on one topic, with real `kappa stream` processes next to the test's own Spark session: a second instance
tries to start while the first writes, the first is killed -9 at a random moment, the next one kills itself between
its last Delta commit and Spark's commit log, the next batch fails on a full disk, the stream catches up once
space returns, and the checkpoint is deleted. After the faults the reconciliation must pass and the checker must
count nothing lost, duplicated or unexpected against the generator's manifests.
"""

from __future__ import annotations

import shutil

import pytest

from spark_apps.io.fencing import FencedOut
from spark_apps.io.lineage import committed_batches, planned_batches
from spark_apps.io.topics import admin_client
from spark_apps.lab.chaos import kill_at_random_moment, kill_at_stage, new_lab, store_version, verify
from spark_apps.lab.checker import check_tables, summary_line
from spark_apps.stream.job import CheckpointMismatch, StreamFailed, StreamJob

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def story(kafka_broker, spark, settings, tmp_path_factory) -> dict:
    lab = new_lab(settings, spark, "subset", tmp_path_factory.mktemp("chaos"), seed=11, max_offsets_per_trigger=250)
    told: dict = {"lab": lab}
    try:
        lab.produce(400)
        first = lab.launch("--continuous")
        first.wait_started()
        with pytest.raises(FencedOut) as fenced:
            StreamJob(spark, lab.settings, lab.target).prepare()
        told.update(fenced=str(fenced.value), first_pid=first.pid, first_survived=first.alive())
        kill_at_random_moment(lab, first)
        kill_at_stage(lab, "before_checkpoint_commit")

        # The batch left uncommitted is in every table already, so its replay redoes nothing. The batch after it,
        # over fresh events, fails on a full disk (a cheap stand-in for `make chaos`'s disk_full), then space
        # returns.
        lab.produce(100)
        failing = planned_batches(lab.checkpoint)[-1] + 1
        with pytest.raises(StreamFailed) as full:
            enospc = lab.settings.with_overrides(fault_inject=f"after_parse@{failing}:enospc")
            StreamJob(spark, enospc, lab.target).run()
        told.update(disk_full=str(full.value), failing=failing,
                    committed_after_failure=committed_batches(lab.checkpoint))
        StreamJob(spark, lab.settings, lab.target).run()  # space returned
        told["verdict"] = verify(lab)

        before = store_version(lab)
        kept = lab.settings.home / "checkpoint-kept"
        shutil.move(lab.checkpoint, kept)
        try:
            with pytest.raises(CheckpointMismatch) as refused:
                StreamJob(spark, lab.settings, lab.target).prepare()
            told.update(refused=str(refused.value), versions=(before, store_version(lab)),
                        after_refusal=check_tables(spark, lab.settings, lab.target, lab.manifests))
        finally:
            shutil.move(kept, lab.checkpoint)
        yield told
    finally:
        lab.stop_everything()
        with admin_client(settings) as admin:
            admin.delete_topics([lab.settings.events_topic])


def test_a_second_instance_on_a_running_checkpoint_is_fenced_out_naming_the_holder(story):
    assert "another instance of this stream is running" in story["fenced"]
    assert f"pid {story['first_pid']} " in story["fenced"]
    assert story["first_survived"]


def test_kill_9_mid_batch_and_before_the_checkpoint_commit_loses_and_duplicates_nothing(story):
    kills = story["lab"].kill_log
    assert [k["kind"] for k in kills] == ["random", "hook"]
    assert kills[1]["stage"] == "before_checkpoint_commit"
    assert story["verdict"].reconciled
    assert summary_line(story["verdict"].check) == "lost=0 duplicated=0 unexpected=0"


def test_a_full_disk_fails_the_job_with_one_clear_line_and_commits_nothing(story):
    assert "No space left on device" in story["disk_full"]
    assert story["failing"] not in story["committed_after_failure"]
    assert story["verdict"].check.exact, "and the replay once space returned is exact"


def test_a_deleted_checkpoint_is_refused_and_leaves_the_tables_untouched(story):
    assert "is missing but" in story["refused"]
    before, after = story["versions"]
    assert before == after
    assert summary_line(story["after_refusal"]) == "lost=0 duplicated=0 unexpected=0"
