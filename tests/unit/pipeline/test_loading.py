import shutil
import sys

import pytest

from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import PROJECT_ROOT
from spark_apps.pipeline.declaration import GoldTable, Pipeline, Sessions, Windows, load_pipeline


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


@pytest.mark.parametrize("spec", [":", ".relative:PIPELINE", "my_sensors:", "my sensors:PIPELINE"])
def test_a_spec_that_is_no_module_attribute_is_refused_in_one_line(outside_the_project, spec):
    with pytest.raises(PlatformError, match=r"give module:attribute, e\.g\. my_pipeline:PIPELINE"):
        load_pipeline(spec)


@pytest.mark.parametrize(("source", "raised"), [
    ("def f(:\n", r"SyntaxError: .* \(.*broken\.py:1\)"),
    ("x = 1\nraise RuntimeError('no config')\n", r"RuntimeError: no config \(.*broken\.py:2\)")])
def test_a_pipeline_module_that_fails_as_it_runs_says_what_and_where(outside_the_project, monkeypatch, source, raised):
    (outside_the_project / "broken.py").write_text(source)
    monkeypatch.delitem(sys.modules, "broken", raising=False)
    with pytest.raises(PlatformError, match=rf"cannot load pipeline 'broken:PIPELINE': importing broken raised "
                                            rf"{raised}"):
        load_pipeline("broken:PIPELINE")


def test_an_unknown_pipeline_name_lists_the_registered_ones():
    with pytest.raises(PlatformError, match="no pipeline named 'nope'; registered: .*marketplace"):
        load_pipeline("nope")


@pytest.mark.parametrize("declared", [
    {"windows": Windows(width_s=60, start_column="minute")},
    {"windows": Windows(width_s=0)},
    {"windows": Windows(width_s=60), "sessions": Sessions(gap_s=60)},
], ids=["start-column-not-a-recompute-key", "no-width", "windows-and-sessions"])
def test_a_gold_table_with_windows_it_cannot_bound_is_refused_at_declaration(declared):
    keys = ("merchant_id", "window_start")
    with pytest.raises(PlatformError, match="windows need"):
        GoldTable(name="revenue", recompute_keys=keys,
                  primary_keys=(*keys, "session_start") if "sessions" in declared else keys,
                  key_rows=lambda rows, settings: rows,
                  compute=lambda rows, settings: rows, **declared)
