"""`make test`'s two workers split the suite by module; the readers of the shared restarted stream stay together."""

from __future__ import annotations

import re

from spark_apps.core.settings import PROJECT_ROOT
from tests.support.work_units import HEAVIEST_FIRST, SHARED_STREAM, SHARED_STREAM_MODULES, work_unit


def reads_the_shared_stream(source: str) -> bool:
    """Whether a test or fixture of ``source`` takes the shared stream (or its audit) as an argument."""
    return any(re.search(r"\b(restarted_stream|audited)\b", params)
               for params in re.findall(r"^\s*def \w+\(([^)]*)\)", source, re.MULTILINE))


def test_every_module_that_reads_the_shared_stream_is_in_its_work_unit():
    readers = {str(path.relative_to(PROJECT_ROOT)) for path in (PROJECT_ROOT / "tests" / "integration").rglob("*.py")
               if path.name != "conftest.py" and reads_the_shared_stream(path.read_text())}
    assert readers == SHARED_STREAM_MODULES


def test_a_test_runs_in_its_modules_unit_and_every_listed_heavy_unit_exists():
    assert work_unit("tests/integration/audit/test_reconcile.py::test_x[a::b]") == SHARED_STREAM
    assert work_unit("tests/unit/io/test_producer_files.py::test_y") == "tests/unit/io/test_producer_files.py"
    assert all((PROJECT_ROOT / unit).is_file() for unit in HEAVIEST_FIRST if unit != SHARED_STREAM)


def test_no_two_test_modules_share_a_file_name():
    """pytest imports test modules by their file name (the test folders are no packages): a second module of the
    same name is refused at collection, in whichever run collects both."""
    names: dict[str, list[str]] = {}
    for path in (PROJECT_ROOT / "tests").rglob("test_*.py"):
        names.setdefault(path.name, []).append(str(path.relative_to(PROJECT_ROOT)))
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}
