"""The chaos lab's own choices, checked without a broker or Spark."""

from spark_apps.lab.chaos import DISK_FULL_STAGES, SCENARIOS
from spark_apps.lab.scenario import SCENARIO_NAMES
from spark_apps.stream.faults import STAGES


def test_a_full_disk_is_drawn_only_before_the_batch_commits_to_the_store():
    assert set(DISK_FULL_STAGES) <= set(STAGES)
    assert DISK_FULL_STAGES == ("after_parse",), "after the store's one commit the batch is published"


def test_every_scenario_a_plan_may_name_is_one_the_lab_runs():
    assert tuple(SCENARIOS) == SCENARIO_NAMES
