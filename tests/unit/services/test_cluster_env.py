"""What ``kappa cluster`` tells the apps, and how the apps' settings follow it."""

import json

import pytest

from spark_apps.cli import main
from spark_apps.core.errors import SettingsError
from spark_apps.core.settings import Settings
from spark_apps.io.spark_session import JIT_HUGE_METHODS, executor_conf
from spark_apps.services import cluster


def test_the_printed_env_points_the_apps_at_every_broker_and_the_master():
    settings = Settings(cluster_kafka_port=19092, cluster_spark_master_port=7077)
    assert cluster.env_lines(settings) == [
        "export KAPPA_KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094",
        "export KAPPA_TOPIC_REPLICATION_FACTOR=3",
        "export KAPPA_TOPIC_MIN_INSYNC_REPLICAS=2",
        "export KAPPA_SPARK_MASTER=spark://127.0.0.1:7077",
        "export KAPPA_SPARK_EXECUTOR_MEMORY=1g",
        "export KAPPA_SPARK_CORES_MAX=1",
    ]


def test_settings_read_from_the_printed_env_equal_the_cluster_app_settings():
    settings = Settings()
    environ = dict(line.removeprefix("export ").split("=", 1) for line in cluster.env_lines(settings))
    assert Settings.from_env(environ) == cluster.app_settings(settings)


@pytest.mark.parametrize(("nodes", "majority"), [(1, 1), (3, 2), (5, 3)])
def test_acks_all_needs_a_majority_of_the_replicas(nodes, majority):
    assert cluster.min_insync_replicas(nodes) == majority


def test_the_quorum_identity_is_kept_once_started_and_reused(tmp_path):
    settings = Settings(home=tmp_path)
    first = cluster.quorum(settings)
    assert not cluster.identity_file(settings).exists()
    cluster.keep_identity(settings, first)
    again = cluster.quorum(settings)
    assert again == first
    assert len({node.directory_id for node in again.nodes}) == 3


def test_a_cluster_made_with_other_nodes_is_refused_with_the_fix(tmp_path):
    settings = Settings(home=tmp_path)
    cluster.keep_identity(settings, cluster.quorum(settings))
    with pytest.raises(cluster.ClusterError, match="delete that folder"):
        cluster.quorum(settings.with_overrides(cluster_kafka_nodes=5))
    assert json.loads(cluster.identity_file(settings).read_text())["directory_ids"].keys() == {"1", "2", "3"}


def test_executors_are_sized_on_a_cluster_master_only():
    assert executor_conf(Settings()) == {}
    on_cluster = Settings(spark_master="spark://127.0.0.1:7077", spark_cores_max=1)
    assert executor_conf(on_cluster) == {"spark.executor.memory": "1g", "spark.cores.max": "1",
                                         "spark.executor.extraJavaOptions": JIT_HUGE_METHODS}


@pytest.mark.parametrize(("variable", "value", "message"), [
    ("KAPPA_CLUSTER_CONTROLLER_PORT", "19094", "the cluster's ports overlap"),
    ("KAPPA_CLUSTER_SPARK_UI_PORT", "7077", "the cluster's ports overlap"),
    ("KAPPA_CLUSTER_KAFKA_PORT", "65534", "KAPPA_CLUSTER_KAFKA_PORT must be a TCP port"),
    ("KAPPA_TOPIC_REPLICATION_FACTOR", "0", "KAPPA_TOPIC_REPLICATION_FACTOR must be at least 1"),
    ("KAPPA_TOPIC_MIN_INSYNC_REPLICAS", "4", "cannot exceed KAPPA_TOPIC_REPLICATION_FACTOR"),
])
def test_a_bad_cluster_setting_is_refused_naming_the_variable(variable, value, message):
    environ = {"KAPPA_TOPIC_REPLICATION_FACTOR": "3", variable: value}
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(environ)


def test_status_of_a_cluster_never_started_says_so_and_fails(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    assert main(["cluster", "status"]) == 1
    out = capsys.readouterr().out
    assert out.count("NOT RUNNING") == 6
    assert "kappa cluster up" in out
    assert not any(tmp_path.iterdir())


def test_down_of_a_cluster_never_started_stops_nothing(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    assert main(["cluster", "down"]) == 0
    assert capsys.readouterr().out.strip() == "cluster was not running"
