"""Shared fixtures: one broker and one SparkSession per test session, each in a throwaway home."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from spark_apps.core.settings import PROJECT_ROOT, Settings
from spark_apps.services.processes import free_port


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
