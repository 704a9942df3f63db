"""The cluster on one machine for the cluster tests: started once per session in a throwaway home, on free ports.

Its processes die with the test process if it is killed; the session stops them at the end either way.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator

import pytest

from spark_apps.core.settings import PROJECT_ROOT, Settings
from spark_apps.services.processes import free_port


def free_port_block(count: int) -> int:
    """The first of ``count`` consecutive free ports on 127.0.0.1 (node n of the quorum takes the n-th)."""
    rng = random.Random()
    for _ in range(200):
        first = rng.randrange(20_000, 60_000 - count)
        if all(_bindable(port) for port in range(first, first + count)):
            return first
    raise RuntimeError(f"no {count} consecutive free ports found")


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.fixture(scope="session")
def cluster_settings(tmp_path_factory: pytest.TempPathFactory, catalog_database) -> Iterator[Settings]:
    """A running cluster (3 KRaft nodes, a Spark master, 2 workers); the settings name it, not yet the apps. Its
    drivers share the test session's catalog database."""
    from spark_apps.services import cluster

    jars = PROJECT_ROOT / "var" / "jars"
    nodes = Settings.cluster_kafka_nodes
    settings = Settings(
        home=tmp_path_factory.mktemp("kappa-cluster"),
        spark_jars_dir=jars / "spark",
        kafka_jars_dir=jars / "kafka",
        cluster_kafka_port=free_port_block(nodes),
        cluster_controller_port=free_port_block(nodes),
        cluster_spark_master_port=free_port(),
        cluster_spark_ui_port=free_port(),
        spark_shuffle_partitions=2,
        catalog_port=catalog_database.settings.catalog_port,
    )
    cluster.start(settings, stop_with_parent=True)
    yield settings
    cluster.stop(settings)


@pytest.fixture(scope="session")
def cluster_app_settings(cluster_settings: Settings, object_store) -> Settings:
    """What an app sees after sourcing ``cluster.env``: the cluster's brokers and master, with the warehouse and
    checkpoints in a bucket of the S3 server, so that no data path is shared by the driver and the workers."""
    from spark_apps.services import cluster
    from tests.support.object_store import on_object_store

    return on_object_store(cluster.app_settings(cluster_settings), object_store, "kappa-cluster")


@pytest.fixture(scope="session")
def cluster_spark(cluster_app_settings: Settings):
    """The test session's own driver, with its executor on a worker of the standalone master."""
    from spark_apps.io.spark_session import get_spark

    session = get_spark(cluster_app_settings, app_name="kappa-cluster-tests")
    yield session
    session.stop()
