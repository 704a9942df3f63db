"""The replay DAG's `pipeline` param deploys new code of the DAG's own pipeline, never another pipeline's."""

from __future__ import annotations

import pytest

from spark_apps.core.errors import PlatformError
from spark_apps.orchestration.tasks import replay_code

SENSORS = "tests.support.sensor_pipeline:PIPELINE"


def test_new_code_of_the_dags_own_pipeline_is_deployed():
    assert replay_code("marketplace", "spark_apps.marketplace.pipeline:PIPELINE") == (
        "spark_apps.marketplace.pipeline:PIPELINE")
    assert replay_code(SENSORS, SENSORS) == SENSORS


def test_another_pipelines_code_is_refused_naming_both_and_the_right_dag():
    with pytest.raises(PlatformError, match=r"^pipeline=marketplace is the code of pipeline 'marketplace', not of "
                                            r"'sensors', whose DAG this is; trigger the replay DAG of 'marketplace'$"):
        replay_code(SENSORS, "marketplace")
