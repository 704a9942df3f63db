"""Shared fixtures: one broker and one SparkSession per test session, each in a throwaway home."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

from spark_apps.core.settings import PROJECT_ROOT, Settings
from spark_apps.services.processes import free_port
from tests.support.work_units import HEAVIEST_FIRST, work_unit

# Notes a session service that died under the tests and prints it last; the session fixtures tell it what to watch.
pytest_plugins = ("tests.support.post_mortem",)

# The Spark drivers the tests start as processes (a `kappa` command, an Airflow task's, the chaos lab's streams) live
# a minute or two over a few hundred records. On two busy cores the JIT's optimizing tier spends more CPU compiling
# than it saves in such a life, so they run with the first tier only: the walkthrough, all `kappa` commands, took
# 238-243 s against 338-379 s (one core each, 2026-12-01). The session's own driver lives as long as its worker and
# keeps both tiers: with the first alone its later audits got slower (a module 564 -> 592 s). With the first tier
# alone the JVM shrinks its code cache to 48 MiB, which a chaos lab stream filled ("Out of space in CodeCache for
# adapters", CI, 2026-12-01), so the cache keeps the size it has with both tiers.
CHILD_DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
# The session's own driver compiles the generated code of every query of its worker's share of the suite: the
# shared-stream unit, the pipelines module and the io unit tests filled 155 MiB of the JVM's default 240 MiB code
# cache in 12 min, and each worker of a whole suite held 170-178 MiB at its end (2026-12-03). A full cache refuses
# new adapters ("Out of space in CodeCache for adapters", a VirtualMachineError), which Spark's executor takes as
# fatal: in local mode that ends the whole driver, and every later test of the worker. The cache is reserved, and
# only used pages are memory.
SESSION_DRIVER_JAVA_OPTIONS = "-XX:ReservedCodeCacheSize=768m"
# The session's own driver also writes its warnings and errors to a file, for the post-mortem of a driver that died.
DRIVER_LOG_CONFIG = Path(__file__).parent / "support" / "driver-log4j2.properties"

# An xdist worker's __main__ (execnet's) has neither __spec__ nor __file__. pyspark.sql.connect, which Great
# Expectations imports, takes that for a doctest run and calls sys.exit(0) when Spark Connect's extras are missing.
_main = sys.modules["__main__"]
if os.environ.get("PYTEST_XDIST_WORKER") and getattr(_main, "__spec__", None) is None \
        and not hasattr(_main, "__file__"):
    _main.__file__ = "<pytest-xdist worker>"


@pytest.fixture(scope="session")
def session_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Settings of the test session: own ports and home, the project's fetched jars; what every process a test
    starts inherits (``as_env``)."""
    jars = PROJECT_ROOT / "var" / "jars"
    return Settings(
        home=tmp_path_factory.mktemp("kappa-home"),
        spark_jars_dir=jars / "spark",
        kafka_jars_dir=jars / "kafka",
        catalog_jars_dir=jars / "catalog",
        catalog_port=free_port(),
        sql_port=free_port(),
        kafka_port=free_port(),
        kafka_controller_port=free_port(),
        spark_shuffle_partitions=2,
        spark_driver_memory="3g",
        spark_driver_java_options=CHILD_DRIVER_JAVA_OPTIONS,
    )


@pytest.fixture(scope="session")
def settings(session_settings: Settings) -> Settings:
    """The session's settings; a module may override this name with settings of its own (pure logic)."""
    return session_settings


@pytest.fixture(scope="session")
def catalog_database(session_settings: Settings):
    """The session's own catalog database: every Spark process a test starts registers its tables there. The
    session's SparkSession and every integration, DAG and cluster test use it; a unit test never starts it."""
    from spark_apps.services.catalog_server import CatalogServer
    from tests.support.post_mortem import SERVICES

    server = CatalogServer(session_settings, stop_with_parent=True)
    server.start()
    SERVICES.add("the session's catalog database", lambda: server.pid() is not None, logs=[server.paths.log_file])
    yield server
    SERVICES.forget("the session's catalog database")
    server.stop()


@pytest.fixture(scope="session")
def kafka_broker(settings: Settings):
    from spark_apps.services.broker import EmbeddedBroker
    from tests.support.post_mortem import SERVICES

    broker = EmbeddedBroker(settings, stop_with_parent=True)
    broker.start()
    SERVICES.add("the session's Kafka broker", broker.is_running,
                 logs=[broker.paths.log_dir / "server.log", broker.paths.log_dir / "stdout.log"])
    yield broker
    SERVICES.forget("the session's Kafka broker")
    broker.stop()


@pytest.fixture(scope="session")
def spark(settings: Settings, catalog_database):
    from spark_apps.io.spark_session import LOG4J_CONFIG, get_spark
    from tests.support.post_mortem import SERVICES

    driver_log = settings.home / "session-driver.log"
    logging = (f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()},{DRIVER_LOG_CONFIG.as_uri()} "
               f"-Dkappa.tests.driver.log={driver_log}")
    session = get_spark(settings.with_overrides(spark_driver_java_options=f"{SESSION_DRIVER_JAVA_OPTIONS} {logging}"),
                        app_name="kappa-tests")
    driver = session.sparkContext._gateway.proc
    SERVICES.add("the session's Spark driver", lambda: driver.poll() is None, driver.poll, logs=[driver_log])
    yield session
    SERVICES.forget("the session's Spark driver")
    session.stop()


@pytest.fixture(scope="session")
def object_store(settings, tmp_path_factory):
    """One S3-compatible server (S3Proxy) for the whole session, on a free port: each test makes a bucket of its
    own (``tests.support.object_store.on_object_store``)."""
    from spark_apps.services.object_store import ObjectStoreServer
    from spark_apps.services.processes import free_port
    from tests.support.post_mortem import SERVICES

    server = ObjectStoreServer(settings.with_overrides(s3_dir=tmp_path_factory.mktemp("s3"), s3_port=free_port()),
                               stop_with_parent=True)
    server.start()
    SERVICES.add("the session's S3-compatible server", lambda: server.pid() is not None,
                 logs=[server.paths.log_file])
    yield server
    SERVICES.forget("the session's S3-compatible server")
    server.stop()


@pytest.fixture
def make_topic(kafka_broker, settings: Settings):
    """Creates correctly configured topics for one test, ``make_topic(name, partitions)``, and deletes them after."""
    from spark_apps.io.topics import ensure_topic
    from tests.support.topics import delete_topics

    created: list[str] = []

    def make(name: str, partitions: int | None = None) -> str:
        ensure_topic(settings, name, partitions)
        created.append(name)
        return name

    yield make
    if created:
        delete_topics(settings, created)


@pytest.fixture
def topic(make_topic) -> str:
    """A fresh, correctly configured topic for one test, deleted afterwards."""
    return make_topic(f"test.{uuid.uuid4().hex[:10]}")


@pytest.fixture
def isolated_home(tmp_path: Path, settings: Settings) -> Settings:
    """Settings whose warehouse, checkpoints and open incidents live in this test's own folder."""
    return settings.with_overrides(warehouse_dir=tmp_path / "warehouse", checkpoint_root=tmp_path / "checkpoints",
                                   alerts_incidents=tmp_path / "alerts" / "incidents.json")



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
