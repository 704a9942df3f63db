"""How `make test`'s pytest-xdist workers split the suite (the hooks that use this are in tests/conftest.py)."""

from __future__ import annotations

# `make test` runs two pytest-xdist workers. A work unit is a whole module, so a module's fixtures are built
# once; the modules that read the session's crashed-and-restarted stream (the `restarted_stream` fixture) share
# one unit, so one worker builds it (tests/unit/test_work_units.py keeps the list whole). The heaviest units go
# first, so that both workers finish at about the same time.
SHARED_STREAM = "the shared restarted stream"
SHARED_STREAM_MODULES = frozenset({
    "tests/integration/stream/test_stream.py",
    "tests/integration/audit/test_reconcile.py",
    "tests/integration/ops/test_overview.py",
    "tests/integration/ops/test_status_command.py",
    "tests/integration/serving/test_dbt.py",
})
HEAVIEST_FIRST = (
    "tests/integration/orchestration/test_airflow.py",
    SHARED_STREAM,
    "tests/integration/lab/test_chaos.py",
    "tests/integration/pipeline/test_two_pipelines.py",
    "tests/integration/pipeline/test_pipelines.py",
    "tests/integration/serving/test_replay.py",
    "tests/integration/serving/test_sql_endpoint.py",
    "tests/integration/pipeline/test_walkthrough.py",
    "tests/integration/stream/test_stream_cli.py",
    "tests/integration/ops/test_supervised_stream.py",
    "tests/integration/stream/test_full_disk.py",
)


def work_unit(nodeid: str) -> str:
    module = nodeid.split("::", 1)[0]
    return SHARED_STREAM if module in SHARED_STREAM_MODULES else module
