import shutil
import sys

import pytest

from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import PROJECT_ROOT
from spark_apps.pipeline.declaration import Pipeline, load_pipeline


@pytest.fixture
def outside_the_project(tmp_path, monkeypatch):
    """A working directory holding the user's pipeline module, with neither it nor '' on sys.path (as under the
    ``kappa`` console script)."""
    shutil.copy(PROJECT_ROOT / "tests" / "support" / "sensor_pipeline.py", tmp_path / "my_sensors.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "my_sensors", raising=False)
    yield tmp_path
    sys.modules.pop("my_sensors", None)


def test_a_module_attribute_pipeline_loads_from_the_working_directory_without_pythonpath(outside_the_project):
    pipeline = load_pipeline("my_sensors:PIPELINE")
    assert isinstance(pipeline, Pipeline) and pipeline.name == "sensors"


def test_a_pipeline_that_cannot_be_imported_says_where_it_was_looked_for(outside_the_project):
    with pytest.raises(PlatformError, match=r"cannot load pipeline 'nowhere:PIPELINE'.*working directory "
                                            rf"\({outside_the_project}\) or PYTHONPATH"):
        load_pipeline("nowhere:PIPELINE")


def test_an_unknown_pipeline_name_lists_the_registered_ones():
    with pytest.raises(PlatformError, match="no pipeline named 'nope'; registered: .*marketplace"):
        load_pipeline("nope")
