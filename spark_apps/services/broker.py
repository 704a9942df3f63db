"""Lifecycle of an embedded Kafka node (KRaft, combined broker + controller).

A node runs from Apache Kafka's own jars (fetched by ``make jars``) as a background JVM, bound to the
configured host only, with its data, pid file and logs under ``KAPPA_HOME``. By default it is the
single-node broker of ``make up``; given a ``KafkaQuorum`` it is one voter of a multi-node cluster
(``kappa cluster up``), where topics are replicated to every node.
"""

from __future__ import annotations

import base64
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from spark_apps.core.errors import BrokerError
from spark_apps.core.settings import PROJECT_ROOT, Settings
from spark_apps.services.daemon import Daemon
from spark_apps.services.processes import java_binary, port_in_use

LOG4J_CONFIG = PROJECT_ROOT / "infra" / "kafka" / "log4j2.properties"
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class BrokerPaths:
    """Where one broker keeps its state."""

    root: Path

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def config_file(self) -> Path:
        return self.root / "server.properties"

    @property
    def pid_file(self) -> Path:
        return self.root / "broker.pid"

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    @property
    def formatted_marker(self) -> Path:
        return self.data_dir / "meta.properties"


def new_cluster_id() -> str:
    """A random KRaft cluster id, as Kafka's own ``Uuid.randomUuid`` makes them: base64url of 16 random bytes,
    never starting with "-" (the storage tool's argument parser would read such an id as an option)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


@dataclass(frozen=True)
class KafkaNode:
    """One combined broker + controller: its id and the two ports it listens on."""

    node_id: int
    host: str
    port: int
    controller_port: int
    # The KRaft directory id of its metadata log; a voter of a multi-node quorum is formatted with it.
    directory_id: str = ""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def controller_address(self) -> str:
        return f"{self.host}:{self.controller_port}"


@dataclass(frozen=True)
class KafkaQuorum:
    """A multi-node cluster: every node is a voter of the KRaft quorum and holds a replica of every partition.

    ``min_insync_replicas`` is how many replicas must have a record before an ``acks=all`` write succeeds, so
    a quorum of 3 with 2 survives the loss of any one node without losing an acknowledged record."""

    cluster_id: str
    nodes: tuple[KafkaNode, ...]
    min_insync_replicas: int

    @property
    def replication_factor(self) -> int:
        return len(self.nodes)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(node.address for node in self.nodes)

    @property
    def bootstrap_controllers(self) -> str:
        return ",".join(node.controller_address for node in self.nodes)

    @property
    def initial_controllers(self) -> str:
        """The storage tool's ``--initial-controllers``: the same on every node of the quorum."""
        return ",".join(f"{n.node_id}@{n.controller_address}:{n.directory_id}" for n in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise BrokerError(f"node {node_id} is not in the quorum (nodes {[n.node_id for n in self.nodes]})")


def single_node(settings: Settings) -> KafkaNode:
    """The embedded broker of ``make up``: node 1 on ``KAPPA_KAFKA_PORT`` / ``KAPPA_KAFKA_CONTROLLER_PORT``."""
    return KafkaNode(1, settings.kafka_host, settings.kafka_port, settings.kafka_controller_port)


def server_properties(settings: Settings, paths: BrokerPaths, node: KafkaNode | None = None,
                      quorum: KafkaQuorum | None = None) -> str:
    """KRaft settings under which transactions and consumer groups work: single-node by default, else those of
    one voter of ``quorum`` with every internal topic replicated to all nodes."""
    node = node or single_node(settings)
    host, port, cport = node.host, node.port, node.controller_port
    controllers = quorum.bootstrap_controllers if quorum else f"{host}:{cport}"
    replicas, min_isr = (quorum.replication_factor, quorum.min_insync_replicas) if quorum else (1, 1)
    durability = [
        f"default.replication.factor={replicas}",
        f"min.insync.replicas={min_isr}",
        # Never elect an out-of-sync replica: it would silently drop acknowledged records.
        "unclean.leader.election.enable=false",
    ] if quorum else []
    return "\n".join([
        "process.roles=broker,controller",
        f"node.id={node.node_id}",
        f"controller.quorum.bootstrap.servers={controllers}",
        f"listeners=PLAINTEXT://{host}:{port},CONTROLLER://{host}:{cport}",
        f"advertised.listeners=PLAINTEXT://{host}:{port}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        f"log.dirs={paths.data_dir}",
        f"num.partitions={settings.topic_partitions}",
        "auto.create.topics.enable=false",
        f"offsets.topic.replication.factor={replicas}",
        "offsets.topic.num.partitions=3",
        f"transaction.state.log.replication.factor={replicas}",
        f"transaction.state.log.min.isr={min_isr}",
        "transaction.state.log.num.partitions=3",
        f"share.coordinator.state.topic.replication.factor={replicas}",
        f"share.coordinator.state.topic.min.isr={min_isr}",
        "group.initial.rebalance.delay.ms=0",
        # Enforce retention every 10 s rather than every 5 min: the platform's topics keep everything, and
        # a topic whose retention was shortened by hand shows its loss (and the auditor's alert) promptly.
        "log.retention.check.interval.ms=10000",
        "num.network.threads=2",
        "num.io.threads=2",
        *durability,
        "",
    ])


class EmbeddedBroker:
    """Formats once, starts in the background, waits until it answers, stops cleanly."""

    def __init__(self, settings: Settings, root: Path | None = None, stop_with_parent: bool = False,
                 quorum: KafkaQuorum | None = None, node_id: int = 1) -> None:
        """``stop_with_parent`` makes the broker die with the process that started it (tests, benches),
        so a killed test run never leaves a broker holding its ports. Without ``quorum`` this is the single-node
        broker of the settings; with it, node ``node_id`` of that quorum."""
        self.settings = settings
        self.paths = BrokerPaths(root or settings.kafka_data_dir)
        self.stop_with_parent = stop_with_parent
        self.quorum = quorum
        self.node = quorum.node(node_id) if quorum else single_node(settings)
        self.daemon = Daemon("broker", self.paths.pid_file, str(self.paths.config_file),
                             self.paths.log_dir / "server.log", STOP_TIMEOUT_S)

    @property
    def bootstrap_servers(self) -> str:
        return self.node.address

    def pid(self) -> int | None:
        """The pid of our running broker, or None."""
        return self.daemon.pid()

    def is_running(self) -> bool:
        return self.pid() is not None

    def answers(self) -> bool:
        """Whether a Kafka broker serves metadata on this broker's address, whoever started it."""
        if not port_in_use(self.node.host, self.node.port):
            return False
        try:
            _describe_cluster(self.bootstrap_servers)
        except Exception:  # noqa: BLE001 - anything but an answer means no broker here
            return False
        return True

    def start(self) -> None:
        """Start the broker unless it already runs; return once it accepts requests."""
        process = self.launch()
        try:
            self.wait_until_ready(process)
        except BrokerError:
            if process is not None:
                self.stop()
            raise

    def launch(self) -> subprocess.Popen | None:
        """Start the JVM without waiting for it to answer (None if it already runs). The nodes of a quorum are
        launched together: none of them answers before a majority of the controllers is up."""
        if self.is_running():
            return None
        java = java_binary()
        classpath = kafka_classpath(self.settings.kafka_jars_dir)
        for port in (self.node.port, self.node.controller_port):
            if port_in_use(self.node.host, port):
                ports = "KAPPA_CLUSTER_KAFKA_PORT / KAPPA_CLUSTER_CONTROLLER_PORT" if self.quorum else \
                    "KAPPA_KAFKA_PORT / KAPPA_KAFKA_CONTROLLER_PORT"
                raise BrokerError(f"port {port} on {self.node.host} is taken by another process; stop it or set "
                                  f"{ports} to free ports")
        self.paths.root.mkdir(parents=True, exist_ok=True)
        self.paths.log_dir.mkdir(parents=True, exist_ok=True)
        self.paths.config_file.write_text(server_properties(self.settings, self.paths, self.node, self.quorum))
        if not self.paths.formatted_marker.exists():
            self._format(java, classpath)
        return self.daemon.launch(
            [java, *self._jvm_options(), "-cp", classpath, "kafka.Kafka", str(self.paths.config_file)],
            output=self.paths.log_dir / "stdout.log", stop_with_parent=self.stop_with_parent)

    def _jvm_options(self) -> list[str]:
        heap = self.settings.kafka_heap
        return [
            f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            f"-Dkafka.logs.dir={self.paths.log_dir}",
            f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
        ]

    def _format(self, java: str, classpath: str) -> None:
        """A single node bootstraps a quorum of itself; a quorum's nodes share one cluster id and voter set."""
        if self.quorum:
            cluster_id, controllers = self.quorum.cluster_id, ["--initial-controllers", self.quorum.initial_controllers]
        else:
            cluster_id, controllers = new_cluster_id(), ["--standalone"]
        result = subprocess.run(
            [java, *self._jvm_options(), "-cp", classpath, "kafka.tools.StorageTool", "format",
             *controllers, "-t", cluster_id, "-c", str(self.paths.config_file)],
            capture_output=True, text=True, check=False,
        )
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise BrokerError(f"formatting the broker storage failed: {detail[-1] if detail else 'no output'}")

    def wait_until_ready(self, process: subprocess.Popen | None = None) -> None:
        """Wait until the broker serves metadata requests, or fail with the log's last words."""
        last_error = "no answer"

        def answers() -> bool:
            nonlocal last_error
            if not port_in_use(self.node.host, self.node.port):
                return False
            try:
                _describe_cluster(self.bootstrap_servers)
                return True
            except Exception as exc:  # noqa: BLE001 - retried until the deadline
                last_error = str(exc) or type(exc).__name__
                return False

        if self.daemon.wait_ready(process, answers, self.settings.kafka_start_timeout_s, BrokerError):
            return
        raise BrokerError(f"the broker did not answer on {self.bootstrap_servers} within "
                          f"{self.settings.kafka_start_timeout_s:.0f}s ({last_error}); "
                          f"see {self.paths.log_dir / 'server.log'}")

    def stop(self) -> bool:
        """Stop the broker cleanly (SIGTERM, then SIGKILL after a timeout). True if it was running."""
        return self.daemon.stop()


def _describe_cluster(bootstrap_servers: str) -> None:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=5000,
                             client_id="kappa-broker-probe")
    try:
        admin.describe_cluster()
    finally:
        admin.close()


def kafka_classpath(jars_dir: Path) -> str:
    if not any(jars_dir.glob("kafka_2.13-*.jar")):
        raise BrokerError(f"the Kafka broker jars are missing in {jars_dir}; run `make jars`")
    return f"{jars_dir}/*"
