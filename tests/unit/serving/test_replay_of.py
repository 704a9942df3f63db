"""A replay deploys new code of its own pipeline: the replay DAG passes `--replay-of`, and code that declares
another pipeline is refused in one line, before any Spark session or generation is started."""

from __future__ import annotations

import pytest

from spark_apps.cli import main
from spark_apps.pipeline.declaration import load_pipeline
from spark_apps.serving.replay import check_code_is_of
from spark_apps.target.generations import ReplayRefused

SENSORS = "tests.support.sensor_pipeline:PIPELINE"


def test_new_code_of_the_same_pipeline_passes():
    check_code_is_of(load_pipeline("spark_apps.marketplace.pipeline:PIPELINE"),
                     "spark_apps.marketplace.pipeline:PIPELINE", load_pipeline("marketplace"))


def test_another_pipelines_code_is_refused_naming_both():
    with pytest.raises(ReplayRefused, match=r"^--pipeline marketplace is the code of pipeline 'marketplace', not of "
                                            r"'sensors', whose replay this is; run the replay of 'marketplace'$"):
        check_code_is_of(load_pipeline("marketplace"), "marketplace", load_pipeline(SENSORS))


def test_the_cli_refuses_before_starting_spark(capsys, monkeypatch):
    monkeypatch.setattr("spark_apps.cli._spark", lambda *a: pytest.fail("no Spark for a refused replay"))
    assert main(["replay", "build", "--pipeline", "marketplace", "--replay-of", SENSORS]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("kappa replay: error: --pipeline marketplace is the code of pipeline 'marketplace'")
    assert "\n" not in err
