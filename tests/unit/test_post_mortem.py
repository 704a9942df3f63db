"""A service of the test session that dies under the tests is named at the end of the output: which one, during
which test, how it ended and its last log lines; one its fixture stops is no death."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from spark_apps.core.settings import PROJECT_ROOT
from tests.support.post_mortem import Watch, exit_meaning, report


def dying_service(tmp_path, code: int) -> tuple[subprocess.Popen, os.PathLike]:
    log = tmp_path / "service.log"
    process = subprocess.Popen([sys.executable, "-c", f"print('first words'); print('last words'); exit({code})"],
                               stdout=open(log, "w"))  # noqa: SIM115 - the child owns it
    return process, log


def test_a_service_that_died_is_noted_once_with_the_test_it_died_in_how_it_ended_and_its_last_lines(tmp_path):
    process, log = dying_service(tmp_path, 52)
    watch = Watch()
    watch.add("the doomed service", lambda: process.poll() is None, process.poll, logs=[log])
    process.wait()
    watch.check("test_a.py::test_it_dies_in")
    watch.check("test_a.py::test_after_it")

    assert [d["during"] for d in watch.deaths] == ["test_a.py::test_it_dies_in"]
    lines = report(watch.deaths)
    assert lines[0].startswith("the doomed service died during test_a.py::test_it_dies_in")
    assert "exit code 52: Spark's handler of an OutOfMemoryError ended it" in lines[0]
    assert lines[-2:] == ["    first words", "    last words"]
    assert any(line.startswith("  memory available: ") for line in lines)
    assert any(line.startswith("  threads on the machine: ") for line in lines)


def test_a_service_its_fixture_stops_is_no_death(tmp_path):
    process, _ = dying_service(tmp_path, 0)
    watch = Watch()
    watch.add("the stopped service", lambda: process.poll() is None, process.poll)
    watch.forget("the stopped service")
    process.wait()
    watch.check("test_a.py::test_teardown")
    assert watch.deaths == [] and report(watch.deaths) == []


def test_an_exit_status_says_what_ended_the_process():
    assert exit_meaning(-9) == "killed by SIGKILL: the kernel's out-of-memory killer, or a kill -9"
    assert exit_meaning(-15) == "killed by SIGTERM"
    assert exit_meaning(134).startswith("exit code 134: the JVM aborted")
    assert exit_meaning(3) == "exit code 3"
    assert exit_meaning(None).startswith("exit status unknown")


def test_a_worker_that_lost_its_service_has_it_printed_after_the_suites_last_line(tmp_path):
    """A real xdist run of a small suite whose session service dies in its first test."""
    (tmp_path / "conftest.py").write_text(textwrap.dedent("""
        import subprocess, sys
        import pytest

        pytest_plugins = ("tests.support.post_mortem",)

        @pytest.fixture(scope="session")
        def service():
            from tests.support.post_mortem import SERVICES

            process = subprocess.Popen([sys.executable, "-c", "exit(52)"])
            SERVICES.add("the doomed service", lambda: process.poll() is None, process.poll)
            yield process
    """))
    (tmp_path / "test_small.py").write_text(textwrap.dedent("""
        def test_it_dies_in(service):
            service.wait()

        def test_after_it(service):
            assert service.returncode == 52
    """))
    run = subprocess.run([sys.executable, "-m", "pytest", "-n", "1", "-p", "no:cacheprovider", str(tmp_path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})

    assert run.returncode == 0, run.stdout + run.stderr
    summary = next(i for i, line in enumerate(run.stdout.splitlines()) if " 2 passed" in line)
    after = run.stdout.splitlines()[summary + 1:]
    assert "services of the test session that died under it" in after[0]
    assert after[1] == ("the doomed service on gw0 died during test_small.py::test_it_dies_in "
                        f"(noticed at {after[1].split('noticed at ')[1].split(')')[0]}): exit code 52: "
                        "Spark's handler of an OutOfMemoryError ended it (no heap left, or no memory for a new thread)")
