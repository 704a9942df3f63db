"""The chaos lab's own choices, checked without a broker or Spark."""

from spark_apps.lab.chaos import DISK_FULL_STAGES
from spark_apps.stream.faults import STAGES


def test_a_full_disk_is_drawn_only_where_a_write_of_the_batch_is_still_to_come():
    assert "before_checkpoint_commit" not in DISK_FULL_STAGES, "its commit row is written: the batch is published"
    assert set(DISK_FULL_STAGES) == set(STAGES) - {"before_checkpoint_commit"}
