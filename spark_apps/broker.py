"""Lifecycle of the embedded single-node Kafka broker (KRaft, combined broker + controller).

The broker runs from Apache Kafka's own jars (fetched by ``make jars``) as a background JVM,
bound to the configured host only, with its data, pid file and logs under ``KAPPA_HOME``.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from spark_apps.errors import BrokerError
from spark_apps.settings import PROJECT_ROOT, Settings

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


def server_properties(settings: Settings, paths: BrokerPaths) -> str:
    """Single-node KRaft settings under which transactions and consumer groups work."""
    host, port, cport = settings.kafka_host, settings.kafka_port, settings.kafka_controller_port
    return "\n".join([
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.bootstrap.servers={host}:{cport}",
        f"listeners=PLAINTEXT://{host}:{port},CONTROLLER://{host}:{cport}",
        f"advertised.listeners=PLAINTEXT://{host}:{port}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        f"log.dirs={paths.data_dir}",
        f"num.partitions={settings.topic_partitions}",
        "auto.create.topics.enable=false",
        "offsets.topic.replication.factor=1",
        "offsets.topic.num.partitions=3",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "transaction.state.log.num.partitions=3",
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
        "group.initial.rebalance.delay.ms=0",
        # Enforce retention every 10 s rather than every 5 min: the platform's topics keep everything, and
        # a topic whose retention was shortened by hand shows its loss (and the auditor's alert) promptly.
        "log.retention.check.interval.ms=10000",
        "num.network.threads=2",
        "num.io.threads=2",
        "",
    ])


class EmbeddedBroker:
    """Formats once, starts in the background, waits until it answers, stops cleanly."""

    def __init__(self, settings: Settings, root: Path | None = None, stop_with_parent: bool = False) -> None:
        """``stop_with_parent`` makes the broker die with the process that started it (tests, benches),
        so a killed test run never leaves a broker holding its ports."""
        self.settings = settings
        self.paths = BrokerPaths(root or settings.kafka_data_dir)
        self.stop_with_parent = stop_with_parent

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.settings.kafka_host}:{self.settings.kafka_port}"

    def pid(self) -> int | None:
        """The pid of our running broker, or None (a stale pid file is removed)."""
        try:
            pid = int(self.paths.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if _process_alive(pid) and _is_our_broker(pid, self.paths.config_file):
            return pid
        self.paths.pid_file.unlink(missing_ok=True)
        return None

    def is_running(self) -> bool:
        return self.pid() is not None

    def start(self) -> None:
        """Start the broker unless it already runs; return once it accepts requests."""
        if self.is_running():
            self.wait_until_ready()
            return
        java = _java_binary()
        classpath = _kafka_classpath(self.settings.kafka_jars_dir)
        for port in (self.settings.kafka_port, self.settings.kafka_controller_port):
            if _port_in_use(self.settings.kafka_host, port):
                raise BrokerError(
                    f"port {port} on {self.settings.kafka_host} is taken by another process; stop it or set "
                    "KAPPA_KAFKA_PORT / KAPPA_KAFKA_CONTROLLER_PORT to free ports")
        self.paths.root.mkdir(parents=True, exist_ok=True)
        self.paths.log_dir.mkdir(parents=True, exist_ok=True)
        self.paths.config_file.write_text(server_properties(self.settings, self.paths))
        if not self.paths.formatted_marker.exists():
            self._format(java, classpath)
        stdout = open(self.paths.log_dir / "stdout.log", "ab")  # noqa: SIM115 - owned by the child process
        process = subprocess.Popen(
            [java, *self._jvm_options(), "-cp", classpath, "kafka.Kafka", str(self.paths.config_file)],
            stdout=stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=_terminate_with_parent if self.stop_with_parent else None,
        )
        stdout.close()
        self.paths.pid_file.write_text(str(process.pid))
        try:
            self.wait_until_ready(process)
        except BrokerError:
            self.stop()
            raise

    def _jvm_options(self) -> list[str]:
        heap = self.settings.kafka_heap
        return [
            f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            f"-Dkafka.logs.dir={self.paths.log_dir}",
            f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
        ]

    def _format(self, java: str, classpath: str) -> None:
        cluster_id = new_cluster_id()
        result = subprocess.run(
            [java, *self._jvm_options(), "-cp", classpath, "kafka.tools.StorageTool", "format",
             "--standalone", "-t", cluster_id, "-c", str(self.paths.config_file)],
            capture_output=True, text=True, check=False,
        )
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise BrokerError(f"formatting the broker storage failed: {detail[-1] if detail else 'no output'}")

    def wait_until_ready(self, process: subprocess.Popen | None = None) -> None:
        """Wait until the broker serves metadata requests, or fail with the log's last words."""
        deadline = time.monotonic() + self.settings.kafka_start_timeout_s
        last_error = "no answer"
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise BrokerError(f"the broker exited with code {process.returncode} while starting; "
                                  f"see {self.paths.log_dir / 'server.log'}")
            if _port_in_use(self.settings.kafka_host, self.settings.kafka_port):
                try:
                    _describe_cluster(self.bootstrap_servers)
                    return
                except Exception as exc:  # noqa: BLE001 - retried until the deadline
                    last_error = str(exc) or type(exc).__name__
            time.sleep(0.25)
        raise BrokerError(f"the broker did not answer on {self.bootstrap_servers} within "
                          f"{self.settings.kafka_start_timeout_s:.0f}s ({last_error}); "
                          f"see {self.paths.log_dir / 'server.log'}")

    def stop(self) -> bool:
        """Stop the broker cleanly (SIGTERM, then SIGKILL after a timeout). True if it was running."""
        pid = self.pid()
        if pid is None:
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline and _process_alive(pid):
            time.sleep(0.2)
        if _process_alive(pid):
            os.kill(pid, signal.SIGKILL)
            while _process_alive(pid):
                time.sleep(0.1)
        self.paths.pid_file.unlink(missing_ok=True)
        return True


def _terminate_with_parent() -> None:
    """In the child, before exec: ask Linux to send SIGTERM when the parent exits."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _describe_cluster(bootstrap_servers: str) -> None:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=5000,
                             client_id="kappa-broker-probe")
    try:
        admin.describe_cluster()
    finally:
        admin.close()


def _java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home) / "bin" / "java" if java_home else None
    if candidate and candidate.exists():
        return str(candidate)
    found = shutil.which("java")
    if not found:
        raise BrokerError("Java was not found: install a JDK 17+ (e.g. apt-get install openjdk-17-jdk-headless) "
                          "or set JAVA_HOME")
    return found


def _kafka_classpath(jars_dir: Path) -> str:
    if not any(jars_dir.glob("kafka_2.13-*.jar")):
        raise BrokerError(f"the Kafka broker jars are missing in {jars_dir}; run `make jars`")
    return f"{jars_dir}/*"


def _port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        status = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1]
        return not status.startswith("Z")
    except (FileNotFoundError, IndexError):
        return True


def _is_our_broker(pid: int, config_file: Path) -> bool:
    """Guards against a recycled pid: the process must run our server.properties."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return False
    return str(config_file).encode() in cmdline
