"""Which pipelines get DAGs: found from the entry-point group and the settings, without importing a pipeline."""

from __future__ import annotations

import sys

import pytest

from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import Settings
from spark_apps.orchestration.pipelines import OrchestratedPipeline, orchestrated_pipelines


def test_every_registered_pipeline_gets_dags_named_after_it():
    assert orchestrated_pipelines(Settings(pipeline="marketplace")) == [
        OrchestratedPipeline("marketplace", "marketplace")]
    assert OrchestratedPipeline("marketplace", "marketplace").dag_id("reconcile") == "kappa_marketplace_reconcile"


def test_a_module_attribute_pipeline_in_the_settings_is_added_under_its_modules_name_without_importing_it():
    found = orchestrated_pipelines(Settings(pipeline="teams.fleet.readings_v2:PIPELINE"))
    assert found == [OrchestratedPipeline("marketplace", "marketplace"),
                     OrchestratedPipeline("readings_v2", "teams.fleet.readings_v2:PIPELINE")]
    assert "teams.fleet.readings_v2" not in sys.modules


def test_a_module_attribute_pipeline_named_like_a_registered_one_is_refused_not_silently_dropped():
    with pytest.raises(PlatformError, match=r"^KAPPA_PIPELINE=team\.marketplace:PIPELINE would get the DAGs of the "
                                            r"registered pipeline 'marketplace'; register it under a name of its own"):
        orchestrated_pipelines(Settings(pipeline="team.marketplace:PIPELINE"))
