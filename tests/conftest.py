"""Shared fixtures: one broker and one SparkSession per test session, each in a throwaway home."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from spark_apps.core.settings import PROJECT_ROOT, Settings
from spark_apps.services.processes import free_port

# An xdist worker's __main__ (execnet's) has neither __spec__ nor __file__. pyspark.sql.connect, which Great
# Expectations imports, takes that for a doctest run and calls sys.exit(0) when Spark Connect's extras are missing.
_main = sys.modules["__main__"]
if getattr(_main, "__spec__", None) is None and not hasattr(_main, "__file__"):
    _main.__file__ = "<pytest-xdist worker>"


@pytest.fixture(scope="session")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Settings of the test session: own ports and home, the project's fetched jars."""
    jars = PROJECT_ROOT / "var" / "jars"
    return Settings(
        home=tmp_path_factory.mktemp("kappa-home"),
        spark_jars_dir=jars / "spark",
        kafka_jars_dir=jars / "kafka",
        kafka_port=free_port(),
        kafka_controller_port=free_port(),
        spark_shuffle_partitions=2,
        spark_driver_memory="3g",
    )


@pytest.fixture(scope="session")
def kafka_broker(settings: Settings):
    from spark_apps.services.broker import EmbeddedBroker

    broker = EmbeddedBroker(settings, stop_with_parent=True)
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def spark(settings: Settings):
    from spark_apps.io.spark_session import get_spark

    session = get_spark(settings, app_name="kappa-tests")
    yield session
    session.stop()


@pytest.fixture
def make_topic(kafka_broker, settings: Settings):
    """Creates correctly configured topics for one test, ``make_topic(name, partitions)``, and deletes them after."""
    from spark_apps.io.topics import admin_client, ensure_topic

    created: list[str] = []

    def make(name: str, partitions: int | None = None) -> str:
        ensure_topic(settings, name, partitions)
        created.append(name)
        return name

    yield make
    if created:
        with admin_client(settings) as admin:
            admin.delete_topics(created)


@pytest.fixture
def topic(make_topic) -> str:
    """A fresh, correctly configured topic for one test, deleted afterwards."""
    return make_topic(f"test.{uuid.uuid4().hex[:10]}")


@pytest.fixture
def isolated_home(tmp_path: Path, settings: Settings) -> Settings:
    """Settings whose warehouse and checkpoints live in this test's own folder."""
    return settings.with_overrides(warehouse_dir=tmp_path / "warehouse", checkpoint_root=tmp_path / "checkpoints")



# `make test` runs two pytest-xdist workers. A work unit is a whole module, so a module's fixtures are built
# once; the modules that read the session's crashed-and-restarted stream (the `restarted_stream` fixture) share
# one unit, so one worker builds it (tests/unit/test_work_units.py keeps the list whole). The heaviest units go
# first, so that both workers finish at about the same time.
SHARED_STREAM = "the shared restarted stream"
SHARED_STREAM_MODULES = frozenset({
    "tests/integration/stream/test_stream.py",
    "tests/integration/audit/test_reconcile.py",
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
    "tests/integration/pipeline/test_walkthrough.py",
    "tests/integration/stream/test_stream_cli.py",
    "tests/integration/ops/test_supervised_stream.py",
    "tests/integration/stream/test_full_disk.py",
)


def work_unit(nodeid: str) -> str:
    module = nodeid.split("::", 1)[0]
    return SHARED_STREAM if module in SHARED_STREAM_MODULES else module


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Sends each work unit (see ``work_unit``) to one worker, in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class ModulesTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False
    return ModulesTogether(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, collects the heaviest work units first (a stable sort keeps each module's own order)."""
    if hasattr(config, "workerinput"):
        rank = {unit: position for position, unit in enumerate(HEAVIEST_FIRST)}
        items.sort(key=lambda item: rank.get(work_unit(item.nodeid), len(rank)))
