"""A cluster on one machine (``kappa cluster up|down|status``): a KRaft quorum and a Spark standalone cluster.

It shows that outgrowing the embedded setup is configuration only: the same apps run against several
brokers that replicate every partition (``min.insync.replicas`` a majority, so one broker may die without
losing an acknowledged record) and against a Spark master whose executors run in other JVMs. The Kafka
nodes are ``EmbeddedBroker`` instances given a ``KafkaQuorum``; the master and the workers are started
with pyspark's own ``bin/spark-class`` (the pip package ships no ``sbin/start-master.sh``). Everything
listens on ``kafka_host`` only, keeps its state, logs and pid file under ``cluster_dir``, and ``down``
stops exactly the processes those pid files name. ``up`` writes the settings that point the apps at the
cluster to ``<cluster_dir>/cluster.env``.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import ENV_PREFIX, Settings
from spark_apps.services.broker import (
    STOP_TIMEOUT_S,
    EmbeddedBroker,
    KafkaNode,
    KafkaQuorum,
    new_cluster_id,
)
from spark_apps.services.daemon import Daemon
from spark_apps.services.processes import port_in_use, spark_home

ENV_FILE = "cluster.env"
# Each executor fills one worker: one core, spark_executor_memory.
WORKER_CORES = 1
# Heap of the master and of each worker JVM (they only schedule; executors have their own).
DAEMON_MEMORY = "512m"
START_TIMEOUT_S = 180.0


class ClusterError(PlatformError):
    """The local cluster could not be started, reached or stopped."""


# ---- what the cluster is ------------------------------------------------------------------------------------------


def min_insync_replicas(nodes: int) -> int:
    """A majority of the replicas: an acks=all write is on most brokers, so losing a minority loses nothing."""
    return nodes // 2 + 1


def master_url(settings: Settings) -> str:
    return f"spark://{settings.kafka_host}:{settings.cluster_spark_master_port}"


def node_ids(settings: Settings) -> list[int]:
    return list(range(1, settings.cluster_kafka_nodes + 1))


def quorum_nodes(settings: Settings, directory_ids: dict[int, str] | None = None) -> tuple[KafkaNode, ...]:
    """Node n listens on the n-th port from ``cluster_kafka_port`` and from ``cluster_controller_port``."""
    directory_ids = directory_ids or {}
    return tuple(KafkaNode(n, settings.kafka_host, settings.cluster_kafka_port + n - 1,
                           settings.cluster_controller_port + n - 1, directory_ids.get(n, ""))
                 for n in node_ids(settings))


def bootstrap_servers(settings: Settings) -> str:
    return ",".join(node.address for node in quorum_nodes(settings))


def app_overrides(settings: Settings) -> dict[str, Any]:
    """The settings that point the apps at the cluster: its brokers, topics replicated to all of them, its master,
    and one executor per app so that two apps (the stream and an audit, say) run side by side on two workers."""
    nodes = settings.cluster_kafka_nodes
    return {
        "kafka_bootstrap_servers": bootstrap_servers(settings),
        "topic_replication_factor": nodes,
        "topic_min_insync_replicas": min_insync_replicas(nodes),
        "spark_master": master_url(settings),
        "spark_executor_memory": settings.spark_executor_memory,
        "spark_cores_max": WORKER_CORES,
    }


def app_settings(settings: Settings) -> Settings:
    """``settings`` pointed at the cluster, as an app sees them after sourcing ``cluster.env``."""
    return settings.with_overrides(**app_overrides(settings))


def env_lines(settings: Settings) -> list[str]:
    """``export KAPPA_...=...`` lines of ``app_overrides``, for a shell or a Makefile to source."""
    return [f"export {ENV_PREFIX}{name.upper()}={value}" for name, value in app_overrides(settings).items()]


# ---- the Kafka quorum ---------------------------------------------------------------------------------------------


def identity_file(settings: Settings) -> Path:
    return settings.cluster_dir / "kafka" / "quorum.json"


def quorum(settings: Settings) -> KafkaQuorum:
    """The quorum with its identity (cluster id, each voter's directory id): the one kept in ``cluster_dir`` once
    the cluster was started (every node is formatted with the same one), else a new one."""
    wanted = node_ids(settings)
    if identity_file(settings).exists():
        identity = json.loads(identity_file(settings).read_text())
        cluster_id = identity["cluster_id"]
        directory_ids = {int(n): d for n, d in identity["directory_ids"].items()}
        if sorted(directory_ids) != wanted:
            raise ClusterError(f"the cluster in {settings.cluster_dir} was made with nodes {sorted(directory_ids)}, "
                               f"not {wanted}; run `kappa cluster down` and delete that folder to change its size")
    else:
        cluster_id, directory_ids = new_cluster_id(), {n: new_cluster_id() for n in wanted}
    return KafkaQuorum(cluster_id, quorum_nodes(settings, directory_ids), min_insync_replicas(len(wanted)))


def keep_identity(settings: Settings, shape: KafkaQuorum) -> None:
    """Record the identity the nodes are about to be formatted with (once: it never changes afterwards)."""
    if not identity_file(settings).exists():
        identity_file(settings).parent.mkdir(parents=True, exist_ok=True)
        identity_file(settings).write_text(json.dumps(
            {"cluster_id": shape.cluster_id, "directory_ids": {str(n.node_id): n.directory_id for n in shape.nodes}},
            indent=2))


def brokers(settings: Settings, stop_with_parent: bool = False, shape: KafkaQuorum | None = None
            ) -> list[EmbeddedBroker]:
    """One ``EmbeddedBroker`` per node, each in ``<cluster_dir>/kafka/node-<n>``."""
    shape = shape or quorum(settings)
    return [EmbeddedBroker(settings, settings.cluster_dir / "kafka" / f"node-{node.node_id}", stop_with_parent,
                           quorum=shape, node_id=node.node_id)
            for node in shape.nodes]


# ---- the Spark standalone cluster ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SparkDaemon:
    """The master or a worker, run by pyspark's own ``bin/spark-class`` with a properties file of its own (whose
    path in the command line tells our process from any other)."""

    name: str
    root: Path
    main_class: str
    arguments: tuple[str, ...]
    properties: tuple[tuple[str, str], ...] = ()
    # Fixed ports it must get: Spark would silently take the next free one, where no app would look.
    ports: tuple[tuple[str, int], ...] = ()

    @property
    def pid_file(self) -> Path:
        return self.root / "daemon.pid"

    @property
    def log_file(self) -> Path:
        return self.root / "daemon.log"

    @property
    def properties_file(self) -> Path:
        return self.root / "spark-daemon.conf"

    @property
    def daemon(self) -> Daemon:
        return Daemon(self.name, self.pid_file, str(self.properties_file), self.log_file, STOP_TIMEOUT_S)

    def pid(self) -> int | None:
        """The pid of our running daemon, or None."""
        return self.daemon.pid()

    def launch(self, host: str, stop_with_parent: bool) -> subprocess.Popen | None:
        """Start it in the background unless it runs (None then); spark-class execs the JVM, so the pid is the
        JVM's."""
        if self.pid() is not None:
            return None
        for setting, port in self.ports:
            if port_in_use(host, port):
                raise ClusterError(f"port {port} on {host} is taken by another process; stop it or set "
                                   f"{ENV_PREFIX}{setting.upper()} to a free port")
        self.root.mkdir(parents=True, exist_ok=True)
        self.properties_file.write_text("".join(f"{key}={value}\n" for key, value in self.properties))
        # Its executors' scratch space (shuffle files, spills) in its own folder, as on a host of its own.
        env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": host,
               "SPARK_DAEMON_MEMORY": DAEMON_MEMORY, "SPARK_CONF_DIR": str(self.root),
               "SPARK_LOCAL_DIRS": str(self.root / "local")}
        return self.daemon.launch(
            [str(spark_home() / "bin" / "spark-class"), self.main_class, *self.arguments,
             "--properties-file", str(self.properties_file)],
            output=self.log_file, env=env, stop_with_parent=stop_with_parent)

    def stop(self) -> bool:
        return self.daemon.stop()


def spark_master(settings: Settings) -> SparkDaemon:
    host = settings.kafka_host
    return SparkDaemon(
        "spark master", settings.cluster_dir / "spark" / "master", "org.apache.spark.deploy.master.Master",
        ("--host", host, "--port", str(settings.cluster_spark_master_port),
         "--webui-port", str(settings.cluster_spark_ui_port)),
        # No REST submission server: apps connect as drivers, nothing is submitted to the cluster.
        (("spark.master.rest.enabled", "false"),),
        (("cluster_spark_master_port", settings.cluster_spark_master_port),
         ("cluster_spark_ui_port", settings.cluster_spark_ui_port)))


def spark_workers(settings: Settings) -> list[SparkDaemon]:
    """Workers of one core and one executor's memory each; their web UIs take a free port on ``kafka_host``."""
    workers = []
    for n in range(1, settings.cluster_spark_workers + 1):
        root = settings.cluster_dir / "spark" / f"worker-{n}"
        workers.append(SparkDaemon(
            f"spark worker {n}", root, "org.apache.spark.deploy.worker.Worker",
            ("--host", settings.kafka_host, "--cores", str(WORKER_CORES),
             "--memory", settings.spark_executor_memory, "--webui-port", "0",
             "--work-dir", str(root / "work"), master_url(settings)),
            # An app's folder (its jars, executor logs) is removed a while after the app ends.
            (("spark.worker.cleanup.enabled", "true"),)))
    return workers


def master_status(settings: Settings) -> dict:
    """The master's JSON status page (workers, applications) on ``kafka_host``; empty if it does not answer."""
    url = f"http://{settings.kafka_host}:{settings.cluster_spark_ui_port}/json/"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.load(response)
    except (urllib.error.URLError, OSError, ValueError):
        return {}


def alive_workers(settings: Settings) -> int:
    return sum(worker.get("state") == "ALIVE" for worker in master_status(settings).get("workers", []))


def running_apps(settings: Settings) -> list[str]:
    """Names of the apps (drivers) the master is running executors for."""
    return [app["name"] for app in master_status(settings).get("activeapps", [])]


# ---- lifecycle ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Component:
    """One process of the cluster as ``status`` shows it."""

    name: str
    address: str
    pid: int | None


def components(settings: Settings) -> list[Component]:
    kafka = [Component(f"kafka node {b.node.node_id}", b.bootstrap_servers, b.pid()) for b in brokers(settings)]
    master = spark_master(settings)
    ui = f"{settings.kafka_host}:{settings.cluster_spark_ui_port}"
    spark = [Component(master.name, f"{master_url(settings)} (web UI http://{ui})", master.pid())]
    spark += [Component(w.name, f"registers with {master_url(settings)}", w.pid()) for w in spark_workers(settings)]
    return kafka + spark


def is_running(settings: Settings) -> bool:
    return all(c.pid is not None for c in components(settings))


def env_file(settings: Settings) -> Path:
    return settings.cluster_dir / ENV_FILE


def start(settings: Settings, stop_with_parent: bool = False) -> bool:
    """Start whatever part of the cluster is not running, wait until the brokers answer and every worker has
    registered, and write ``cluster.env``. False if everything was already running. If a part fails to start,
    everything is stopped again and the error names the log to read."""
    if is_running(settings):
        _write_env(settings)
        return False
    try:
        _start_kafka(settings, stop_with_parent)
        _start_spark(settings, stop_with_parent)
    except PlatformError:
        stop(settings)
        raise
    _write_env(settings)
    return True


def _start_kafka(settings: Settings, stop_with_parent: bool) -> None:
    shape = quorum(settings)
    keep_identity(settings, shape)
    nodes = brokers(settings, stop_with_parent, shape)
    launched = [(broker, broker.launch()) for broker in nodes]
    for broker, process in launched:
        broker.wait_until_ready(process)


def _start_spark(settings: Settings, stop_with_parent: bool) -> None:
    host, master, workers = settings.kafka_host, spark_master(settings), spark_workers(settings)
    process = master.launch(host, stop_with_parent)
    _wait(lambda: port_in_use(host, settings.cluster_spark_master_port), process, master)
    processes = [(worker, worker.launch(host, stop_with_parent)) for worker in workers]
    for worker, started in processes:
        _wait(lambda: alive_workers(settings) >= len(workers), started, worker)


def _wait(ready, process: subprocess.Popen | None, daemon: SparkDaemon) -> None:
    if not daemon.daemon.wait_ready(process, ready, START_TIMEOUT_S, ClusterError, every_s=0.5):
        raise ClusterError(f"the {daemon.name} was not ready within {START_TIMEOUT_S:.0f}s; see {daemon.log_file}")


def _write_env(settings: Settings) -> None:
    path = env_file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# Written by `kappa cluster up`: settings that point the apps at the local cluster.\n"
                    + "\n".join(env_lines(settings)) + "\n")


def stop(settings: Settings) -> list[str]:
    """Stop every process of the cluster that runs (Spark first, then all Kafka nodes at once: a node stopped
    alone waits for a controller quorum the others would no longer form); return the names of those stopped.
    ``cluster.env`` is removed so that nothing sources the address of a stopped cluster."""
    stopped = [d.name for d in [*spark_workers(settings), spark_master(settings)] if d.stop()]
    nodes = brokers(settings)
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        results = list(pool.map(lambda broker: broker.stop(), nodes))
    stopped += [f"kafka node {b.node.node_id}" for b, was_running in zip(nodes, results, strict=True) if was_running]
    env_file(settings).unlink(missing_ok=True)
    return stopped
