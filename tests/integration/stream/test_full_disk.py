"""A real full disk under the stream: its warehouse is a small tmpfs that the test fills to the last byte.

The chaos subset injects ENOSPC from a hook, which proves the job's handling but not what Spark, Parquet and Delta
do when the kernel refuses a write. Here the kernel refuses it. The stream must stop with one line that says the
disk is full, leave every table and Spark's commit log as they were, and, once space is freed, resume to a result
that reconciles exactly and loses or duplicates nothing against the generator's manifests.
"""

from __future__ import annotations

import pytest

from spark_apps.io.lineage import committed_batches, planned_batches
from spark_apps.io.topics import admin_client
from spark_apps.lab.chaos import new_lab, store_version, verify
from spark_apps.lab.checker import summary_line
from spark_apps.stream.job import StreamFailed, StreamJob
from tests.support.disks import CannotMount, fill, free_bytes, small_tmpfs

pytestmark = pytest.mark.integration

TMPFS_MB = 64


@pytest.fixture(scope="module")
def full_disk(kafka_broker, spark, settings, tmp_path_factory) -> dict:
    lab = new_lab(settings, spark, "full-disk", tmp_path_factory.mktemp("full-disk"), seed=5,
                  max_offsets_per_trigger=1000)
    try:
        with small_tmpfs(lab.settings.warehouse_dir, TMPFS_MB) as warehouse:
            lab.produce(300)
            StreamJob(spark, lab.settings, lab.target).run()
            committed_before = committed_batches(lab.checkpoint)
            versions_before = store_version(lab)

            filler = fill(warehouse)
            told: dict = {"free_when_full": free_bytes(warehouse)}
            lab.produce(200)
            with pytest.raises(StreamFailed) as full:
                StreamJob(spark, lab.settings, lab.target).run()
            told.update(failure=str(full.value), committed_before=committed_before,
                        committed_after=committed_batches(lab.checkpoint), planned=planned_batches(lab.checkpoint),
                        versions=(versions_before, store_version(lab)))

            filler.unlink()
            StreamJob(spark, lab.settings, lab.target).run()
            told["verdict"] = verify(lab)
            yield told
    except CannotMount as refused:
        pytest.skip(f"no real full disk on this machine ({refused}); the hook-based ENOSPC of the chaos subset "
                    "still covers the job's side")
    finally:
        lab.stop_everything()
        with admin_client(settings) as admin:
            admin.delete_topics([lab.settings.events_topic])


def test_the_filesystem_under_the_warehouse_is_really_full(full_disk):
    assert full_disk["free_when_full"] == 0


def test_a_real_full_disk_stops_the_stream_with_one_line_naming_it(full_disk):
    failure = full_disk["failure"]
    assert "\n" not in failure
    assert "No space left on device" in failure


def test_a_real_full_disk_commits_nothing_to_any_table_or_to_sparks_commit_log(full_disk):
    before, after = full_disk["versions"]
    assert after == before
    assert full_disk["committed_after"] == full_disk["committed_before"]
    assert max(full_disk["planned"]) not in full_disk["committed_after"], "the failed batch is planned, not committed"


def test_the_stream_resumes_exactly_once_space_is_freed(full_disk):
    assert full_disk["verdict"].reconciled
    assert summary_line(full_disk["verdict"].check) == "lost=0 duplicated=0 unexpected=0"
