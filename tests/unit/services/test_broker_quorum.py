"""Server properties of the single-node broker and of one voter of a multi-node KRaft quorum."""

from pathlib import Path

from spark_apps.core.settings import Settings
from spark_apps.services.broker import BrokerPaths, EmbeddedBroker, KafkaNode, KafkaQuorum, server_properties

NODES = tuple(KafkaNode(n, "127.0.0.1", 19091 + n, 19191 + n, f"dir{n}") for n in (1, 2, 3))
QUORUM = KafkaQuorum("clusterid", NODES, min_insync_replicas=2)


def properties(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_a_quorum_voter_listens_on_its_own_ports_and_finds_every_controller():
    props = properties(server_properties(Settings(), BrokerPaths(Path("/k/node-2")), NODES[1], QUORUM))
    assert props["process.roles"] == "broker,controller"
    assert props["node.id"] == "2"
    assert props["controller.quorum.bootstrap.servers"] == "127.0.0.1:19192,127.0.0.1:19193,127.0.0.1:19194"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19093,CONTROLLER://127.0.0.1:19193"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:19093"
    assert props["log.dirs"] == "/k/node-2/data"


def test_a_quorum_replicates_every_topic_to_all_nodes_and_acknowledges_on_a_majority():
    props = properties(server_properties(Settings(), BrokerPaths(Path("/k")), NODES[0], QUORUM))
    assert props["default.replication.factor"] == "3"
    assert props["min.insync.replicas"] == "2"
    assert props["offsets.topic.replication.factor"] == "3"
    assert props["transaction.state.log.replication.factor"] == "3"
    assert props["transaction.state.log.min.isr"] == "2"
    assert props["share.coordinator.state.topic.replication.factor"] == "3"
    assert props["unclean.leader.election.enable"] == "false"


def test_the_single_node_broker_keeps_its_settings():
    settings = Settings(kafka_port=9092, kafka_controller_port=9093)
    props = properties(server_properties(settings, BrokerPaths(Path("/k"))))
    assert props["node.id"] == "1"
    assert props["controller.quorum.bootstrap.servers"] == "127.0.0.1:9093"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert props["offsets.topic.replication.factor"] == "1"
    assert props["transaction.state.log.min.isr"] == "1"
    assert "default.replication.factor" not in props and "min.insync.replicas" not in props


def test_every_voter_is_formatted_with_the_same_initial_controllers():
    assert QUORUM.initial_controllers == \
        "1@127.0.0.1:19192:dir1,2@127.0.0.1:19193:dir2,3@127.0.0.1:19194:dir3"
    assert QUORUM.bootstrap_servers == "127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094"


def test_a_broker_of_a_quorum_answers_on_its_own_node_address(tmp_path):
    broker = EmbeddedBroker(Settings(home=tmp_path), tmp_path / "node-3", quorum=QUORUM, node_id=3)
    assert broker.bootstrap_servers == "127.0.0.1:19094"
    assert broker.paths.pid_file == tmp_path / "node-3" / "broker.pid"
    assert broker.pid() is None
