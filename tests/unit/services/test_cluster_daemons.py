"""The Spark standalone daemons: loopback only, their own identity, and no silent move to another port."""

import socket

import pytest

from spark_apps.core.settings import Settings
from spark_apps.services import cluster


def test_a_taken_master_port_is_refused_instead_of_spark_moving_to_the_next_one(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        settings = Settings(home=tmp_path, cluster_spark_master_port=taken.getsockname()[1])
        with pytest.raises(cluster.ClusterError, match="KAPPA_CLUSTER_SPARK_MASTER_PORT to a free port"):
            cluster.spark_master(settings).launch("127.0.0.1", stop_with_parent=True)
    assert not (tmp_path / "cluster").exists()


def test_workers_have_one_core_and_one_executors_memory_and_bind_the_configured_host(tmp_path):
    settings = Settings(home=tmp_path, spark_executor_memory="768m", cluster_spark_workers=2)
    workers = cluster.spark_workers(settings)
    assert [w.name for w in workers] == ["spark worker 1", "spark worker 2"]
    arguments = workers[1].arguments
    assert arguments[arguments.index("--cores") + 1] == "1"
    assert arguments[arguments.index("--memory") + 1] == "768m"
    assert arguments[arguments.index("--host") + 1] == "127.0.0.1"
    assert arguments[-1] == "spark://127.0.0.1:7077"


def test_each_daemon_is_told_apart_by_a_properties_file_of_its_own(tmp_path):
    settings = Settings(home=tmp_path)
    daemons = [cluster.spark_master(settings), *cluster.spark_workers(settings)]
    assert len({d.properties_file for d in daemons}) == len(daemons)
    assert all(d.properties_file.is_relative_to(settings.cluster_dir) for d in daemons)
    assert all(d.pid() is None for d in daemons)
