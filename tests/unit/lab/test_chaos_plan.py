"""The chaos lab's own choices, checked without a broker or Spark."""

from spark_apps.lab.chaos import DISK_FULL_STAGES
from spark_apps.stream.faults import STAGES


def test_a_full_disk_is_drawn_only_before_the_batch_commits_to_the_store():
    assert set(DISK_FULL_STAGES) <= set(STAGES)
    assert DISK_FULL_STAGES == ("after_parse",), "after the store's one commit the batch is published"
