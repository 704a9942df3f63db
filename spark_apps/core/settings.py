"""One typed settings object for every app, DAG and test.

Defaults describe the embedded single-machine setup; every field can be overridden by an
environment variable named ``KAPPA_<FIELD>`` (for example ``KAPPA_KAFKA_PORT=19092``).
Paths default to folders under ``KAPPA_HOME`` (the project's ignored ``var/`` folder).
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from spark_apps.core.errors import SettingsError
from spark_apps.core.object_path import ObjectPath, ObjectStoreAccess, is_uri, parse
from spark_apps.core.secret import Secret

ENV_PREFIX = "KAPPA_"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
log = logging.getLogger(__name__)


def _under_home(name: str) -> Any:
    """Marks a path field whose default is ``<home>/<name>``, resolved after ``home`` is known."""
    return field(default=None, metadata={"under_home": name})


@dataclass(frozen=True)
class Settings:
    """Everything an app needs to find its services, data and limits."""

    home: Path = PROJECT_ROOT / "var"
    # A local folder, or a folder on object storage (``s3a://bucket/warehouse``, reached at ``s3_endpoint``).
    warehouse_dir: Path | ObjectPath = _under_home("warehouse")
    checkpoint_root: Path | ObjectPath = _under_home("checkpoints")
    # The jars belong to the installation (`make jars` fetches them there), not to a home.
    spark_jars_dir: Path = PROJECT_ROOT / "var" / "jars" / "spark"
    kafka_jars_dir: Path = PROJECT_ROOT / "var" / "jars" / "kafka"
    catalog_jars_dir: Path = PROJECT_ROOT / "var" / "jars" / "catalog"
    s3_jars_dir: Path = PROJECT_ROOT / "var" / "jars" / "objectstore"
    spark_class_archive: Path = PROJECT_ROOT / "var" / "jars" / "spark-classes.jsa"
    kafka_data_dir: Path = _under_home("kafka")
    catalog_dir: Path = _under_home("catalog")
    log_dir: Path = _under_home("logs")
    reports_dir: Path = _under_home("reports")
    gx_dir: Path = _under_home("gx")
    run_dir: Path = _under_home("run")
    alerts_outbox: Path = _under_home("alerts/outbox.jsonl")
    alerts_incidents: Path = _under_home("alerts/incidents.json")
    browser: str = "chromium"
    airflow_home: Path = _under_home("airflow")
    dbt_target_dir: Path = _under_home("dbt/target")
    dbt_log_dir: Path = _under_home("dbt/logs")
    chaos_dir: Path = _under_home("chaos")
    cluster_dir: Path = _under_home("cluster")
    expectations_dir: Path = PROJECT_ROOT / "expectations"
    dbt_project_dir: Path = PROJECT_ROOT / "dbt_project"

    kafka_host: str = "127.0.0.1"
    kafka_port: int = 9092
    kafka_controller_port: int = 9093
    kafka_heap: str = "512m"
    kafka_start_timeout_s: float = 60.0
    kafka_bootstrap_servers: str = ""
    events_topic: str = "marketplace.events"
    topic_partitions: int = 3
    # Copies of each partition (-1: the brokers' default.replication.factor) and how many must hold a record before
    # an acks=all write succeeds (0: the brokers' min.insync.replicas). A cluster sets 3 and 2.
    topic_replication_factor: int = -1
    topic_min_insync_replicas: int = 0

    # The shared catalog: a Derby network server holding the Hive metastore database that every Spark process
    # (stream, audit, Airflow tasks, dbt, the SQL endpoint) registers and reads tables through.
    catalog_host: str = "127.0.0.1"
    catalog_port: int = 1527
    catalog_start_timeout_s: float = 60.0
    s3_endpoint: str = ""
    s3_access_key: str = "kappa"
    s3_secret_key: Secret = Secret()
    s3_host: str = "127.0.0.1"
    s3_port: int = 9878
    s3_dir: Path = _under_home("s3")
    s3_start_timeout_s: float = 60.0
    # How often Spark's S3A client tries a request again when the store does not answer, at each of its two levels
    # (the AWS SDK's attempts, then S3A's retries): with Hadoop's defaults (5 and 7) a stream whose store went
    # away keeps a micro-batch waiting for minutes before it fails.
    s3_retries: int = 5
    # On object storage a write to a table waits this long for another process's write to it to end
    # (``io.catalog_locks``): an OPTIMIZE of a large table holds it for minutes.
    table_lock_timeout_s: float = 900.0
    # The SQL endpoint (Spark's Thrift Server, HiveServer2 protocol) of `make sql` / `kappa sql start`.
    sql_host: str = "127.0.0.1"
    sql_port: int = 10000
    sql_start_timeout_s: float = 180.0

    spark_master: str = "local[2]"
    # Where a driver listens, and the address its executors reach it at: loopback on one machine; a cluster whose
    # workers run elsewhere needs an address they can reach (and KAPPA_ALLOW_REMOTE=true).
    spark_driver_bind_address: str = "127.0.0.1"
    spark_driver_host: str = "127.0.0.1"
    spark_driver_memory: str = "2g"
    spark_driver_java_options: str = ""
    spark_shuffle_partitions: int = 4
    delta_snapshot_partitions: int = 1
    spark_ui_enabled: bool = False
    # On a cluster master (not local[...]): each executor's memory, and the cores one app may take (0: all offered),
    # so that the stream, the auditor and dbt can run side by side on a small cluster.
    spark_executor_memory: str = "1g"
    spark_cores_max: int = 0

    # `kappa cluster up`: a KRaft quorum of this many combined broker + controller nodes (node n listens on
    # cluster_kafka_port + n - 1 and cluster_controller_port + n - 1) and a Spark standalone master with
    # workers of one core each, all on kafka_host.
    cluster_kafka_nodes: int = 3
    cluster_kafka_port: int = 19092
    cluster_controller_port: int = 19192
    cluster_spark_master_port: int = 7077
    cluster_spark_ui_port: int = 8090
    cluster_spark_workers: int = 2

    allowed_lateness_s: int = 900
    max_offsets_per_trigger: int = 200_000
    trigger_interval_s: float = 2.0
    pipeline: str = "marketplace"
    # Reconciliation compares per-bucket fingerprints first; tables without a window column hash keys into this many.
    reconcile_buckets: int = 64
    # Test and chaos hook: "<stage>@<batch id>[:kill|:enospc]" stops the job at that point of foreachBatch.
    fault_inject: str = ""

    # Alert sinks: empty means not configured (alerts are still recorded in audit.alerts and logged).
    alert_webhook_url: Secret = Secret()
    alert_slack_webhook_url: Secret = Secret()
    alert_pagerduty_routing_key: Secret = Secret()
    alert_pagerduty_url: str = "https://events.pagerduty.com/v2/enqueue"
    alert_timeout_s: float = 5.0
    alert_retries: int = 2

    # Stream supervision: the job is stalled when its heartbeat is older than this, lagging beyond this many records.
    supervise_every_min: int = 5
    stream_stall_s: int = 600
    max_lag_records: int = 50_000
    # This many restarts by the supervisor within the window is a crash loop: the restart page turns critical.
    crash_loop_restarts: int = 3
    crash_loop_window_s: int = 3600
    # More dead letters than this share of the records the stream read within the window is a data problem that
    # stream and batch agree on (a producer on a new schema version): the supervisor raises it.
    dead_letter_max_ratio: float = 0.05
    dead_letter_window_s: int = 900
    # An event stamped more than this many seconds after the broker appended it comes from a producer whose clock
    # (or code) is wrong: stream and batch agree on it, so the supervisor raises it (see runbook future-events).
    future_skew_s: int = 300

    # Serving: K consecutive exact reconciliations of distinct stream batches, spanning at least this long,
    # switch a gold table from the batch snapshot (lambda) to the stream table (kappa).
    serving_exact_runs: int = 3
    serving_min_span_s: int = 7200
    reconcile_schedule: str = "@hourly"
    # A reconcile run not finished this long after it was queued pages (an Airflow Deadline Alert): by default,
    # when the next hourly run is due. 0 turns the deadline off.
    reconcile_deadline_s: int = 3600
    # The dbt DAG also runs on this schedule, so the marts stay fresh while audits are skipped.
    dbt_schedule: str = "@hourly"
    # Once every gold table serves from the stream, the batch only audits, this often.
    kappa_audit_every_s: int = 21_600
    # A scheduled audit extends the last verified one by the new records (incremental), except that it recomputes
    # the whole log (full) when the last full run is at least this old.
    full_audit_every_s: int = 86_400

    maintenance_schedule: str = "@daily"
    vacuum_retention_hours: int = 168
    # Compaction folds the stream's store off the hot path: whole epochs of this many micro-batches, the newest
    # epoch left to the stream (``stream.compaction``).
    compaction_schedule: str = "*/10 * * * *"
    compaction_epoch_batches: int = 20
    # The stream also compacts its own store, in a process of low CPU priority, whenever an epoch ends: each
    # table whose tail adds at least this share to the cost of a full scan of its base (a small table's tail soon
    # does, with a file a batch; a large table waits, as rewriting its base for a small tail would cost more than
    # it saves).
    compaction_in_stream: bool = True
    compaction_tail_ratio: float = 0.4
    compaction_nice: int = 19

    task_retries: int = 2
    task_retry_delay_s: int = 60
    # An Airflow task running longer than this fails (and pages): long enough for a full audit or a replay build.
    task_timeout_s: int = 4 * 3600
    airflow_host: str = "127.0.0.1"
    # Services listen on loopback only; another address must be asked for explicitly.
    allow_remote: bool = False
    airflow_port: int = 8080
    airflow_log_server_port: int = 8793

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            sub = f.metadata.get("under_home")
            if sub and getattr(self, f.name) is None:
                object.__setattr__(self, f.name, self.home / sub)
            elif isinstance(getattr(self, f.name), Path):
                object.__setattr__(self, f.name, _absolute(getattr(self, f.name)))
            if f.name in SECRET_FIELDS and not isinstance(getattr(self, f.name), Secret):
                object.__setattr__(self, f.name, Secret(str(getattr(self, f.name))))
        for name in LOCATION_FIELDS:
            object.__setattr__(self, name, self._location(name, getattr(self, name)))
        if not self.kafka_bootstrap_servers:
            object.__setattr__(self, "kafka_bootstrap_servers", f"{self.kafka_host}:{self.kafka_port}")
        self._validate()

    def object_store_access(self) -> ObjectStoreAccess:
        """The endpoint and keys every reader of an ``s3a://`` location uses."""
        return ObjectStoreAccess(self.s3_endpoint, self.s3_access_key, self.s3_secret_key,
                                 self.s3_dir / S3_CREDENTIALS_FILE)

    def object_store_buckets(self) -> list[str]:
        """The buckets of the locations that live on object storage, none when every one is local."""
        return sorted({location.bucket for location in (getattr(self, name) for name in LOCATION_FIELDS)
                       if isinstance(location, ObjectPath)})

    def _location(self, name: str, value: Any) -> Path | ObjectPath:
        """A location field's value: a local path, or an object-store folder bound to this endpoint and keys."""
        text = str(value)
        if isinstance(value, ObjectPath) or is_uri(text):
            try:
                return parse(text, self.object_store_access())
            except SettingsError as exc:
                raise SettingsError(f"{_env_name(name)}: {exc}") from None
        return _absolute(Path(value).expanduser())

    def _validate(self) -> None:
        for name in LISTEN_HOST_FIELDS:
            host = getattr(self, name)
            if not self.allow_remote and not is_loopback(host):
                raise SettingsError(f"{_env_name(name)}={host} would listen beyond this machine; use a loopback "
                                    "address, or set KAPPA_ALLOW_REMOTE=true to mean it")
        for name in ("kafka_port", "kafka_controller_port", "airflow_port", "airflow_log_server_port", "catalog_port",
                     "s3_port", "sql_port"):
            port = getattr(self, name)
            if not 1 <= port <= 65535:
                raise SettingsError(f"{_env_name(name)} must be a TCP port (1-65535), got {port}")
        if self.kafka_port == self.kafka_controller_port:
            raise SettingsError("KAPPA_KAFKA_PORT and KAPPA_KAFKA_CONTROLLER_PORT must differ")
        self._validate_cluster()
        for name in ("topic_partitions", "spark_shuffle_partitions", "delta_snapshot_partitions",
                     "max_offsets_per_trigger", "reconcile_buckets",
                     "serving_exact_runs", "supervise_every_min", "stream_stall_s", "max_lag_records",
                     "crash_loop_restarts", "crash_loop_window_s", "dead_letter_window_s", "future_skew_s",
                     "kappa_audit_every_s", "full_audit_every_s", "task_retry_delay_s", "task_timeout_s"):
            if getattr(self, name) < 1:
                raise SettingsError(f"{_env_name(name)} must be at least 1, got {getattr(self, name)}")
        for name in ("kafka_start_timeout_s", "catalog_start_timeout_s", "sql_start_timeout_s", "s3_start_timeout_s",
                     "table_lock_timeout_s", "trigger_interval_s", "alert_timeout_s"):
            seconds = getattr(self, name)
            if not (math.isfinite(seconds) and seconds > 0):
                raise SettingsError(f"{_env_name(name)} must be a finite number of seconds above 0, got {seconds}")
        if self.reconcile_deadline_s < 0:
            raise SettingsError(f"KAPPA_RECONCILE_DEADLINE_S must be >= 0, got {self.reconcile_deadline_s}")
        if not 0 <= self.dead_letter_max_ratio < 1:
            raise SettingsError(f"KAPPA_DEAD_LETTER_MAX_RATIO must be in [0, 1), got {self.dead_letter_max_ratio}")
        if self.allowed_lateness_s < 0:
            raise SettingsError(f"KAPPA_ALLOWED_LATENESS_S must be >= 0, got {self.allowed_lateness_s}")
        if self.compaction_epoch_batches < 1:
            raise SettingsError("KAPPA_COMPACTION_EPOCH_BATCHES must be at least 1, "
                                f"got {self.compaction_epoch_batches}")
        if not 0 <= self.compaction_nice <= 19:
            raise SettingsError(f"KAPPA_COMPACTION_NICE must be between 0 and 19, got {self.compaction_nice}")
        if self.compaction_tail_ratio < 0:
            raise SettingsError(f"KAPPA_COMPACTION_TAIL_RATIO must be >= 0, got {self.compaction_tail_ratio}")
        for name in ("serving_min_span_s", "alert_retries", "task_retries", "s3_retries"):
            if getattr(self, name) < 0:
                raise SettingsError(f"{_env_name(name)} must be >= 0, got {getattr(self, name)}")
        if self.vacuum_retention_hours < 168:
            raise SettingsError("KAPPA_VACUUM_RETENTION_HOURS must be at least 168 (7 days): the auditor and "
                                f"a rollback read old table versions, got {self.vacuum_retention_hours}")
        if not self.events_topic:
            raise SettingsError("KAPPA_EVENTS_TOPIC must not be empty")

    def _validate_cluster(self) -> None:
        for name in ("cluster_kafka_nodes", "cluster_spark_workers"):
            if getattr(self, name) < 1:
                raise SettingsError(f"{_env_name(name)} must be at least 1, got {getattr(self, name)}")
        last = self.cluster_kafka_nodes - 1
        for name in ("cluster_kafka_port", "cluster_controller_port", "cluster_spark_master_port",
                     "cluster_spark_ui_port"):
            port = getattr(self, name)
            span = last if name in ("cluster_kafka_port", "cluster_controller_port") else 0
            if not 1 <= port <= 65535 - span:
                raise SettingsError(f"{_env_name(name)} must be a TCP port (1-{65535 - span}), got {port}")
        kafka = set(range(self.cluster_kafka_port, self.cluster_kafka_port + last + 1))
        controllers = set(range(self.cluster_controller_port, self.cluster_controller_port + last + 1))
        spark = {self.cluster_spark_master_port, self.cluster_spark_ui_port}
        if kafka & controllers or (kafka | controllers) & spark or len(spark) == 1:
            raise SettingsError("the cluster's ports overlap: KAPPA_CLUSTER_KAFKA_PORT and "
                                "KAPPA_CLUSTER_CONTROLLER_PORT each take KAPPA_CLUSTER_KAFKA_NODES consecutive ports, "
                                "KAPPA_CLUSTER_SPARK_MASTER_PORT and KAPPA_CLUSTER_SPARK_UI_PORT one each")
        if self.topic_replication_factor == 0 or self.topic_replication_factor < -1:
            raise SettingsError("KAPPA_TOPIC_REPLICATION_FACTOR must be at least 1 (or -1 for the brokers' default), "
                                f"got {self.topic_replication_factor}")
        if self.topic_min_insync_replicas < 0:
            raise SettingsError(f"KAPPA_TOPIC_MIN_INSYNC_REPLICAS must be >= 0 (0: the brokers' default), "
                                f"got {self.topic_min_insync_replicas}")
        if 0 < self.topic_replication_factor < self.topic_min_insync_replicas:
            raise SettingsError("KAPPA_TOPIC_MIN_INSYNC_REPLICAS cannot exceed KAPPA_TOPIC_REPLICATION_FACTOR "
                                "(no acks=all write could succeed)")
        if self.spark_cores_max < 0:
            raise SettingsError(f"KAPPA_SPARK_CORES_MAX must be >= 0 (0: all offered), got {self.spark_cores_max}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Build settings from ``KAPPA_*`` variables; explicit keyword overrides win."""
        environ = os.environ if environ is None else environ
        _warn_unknown(environ)
        hints = get_type_hints(cls)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = environ.get(_env_name(f.name))
            if raw is not None:
                values[f.name] = _coerce(f.name, raw, hints[f.name])
        values.update(overrides)
        return cls(**values)

    def with_overrides(self, **changes: Any) -> Settings:
        """A copy with some fields changed; values derived from ``home`` or the Kafka address follow."""
        derived: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            sub = f.metadata.get("under_home")
            if sub and f.name not in changes and getattr(self, f.name) == self.home / sub:
                derived[f.name] = None
        if "kafka_bootstrap_servers" not in changes and \
                self.kafka_bootstrap_servers == f"{self.kafka_host}:{self.kafka_port}":
            derived["kafka_bootstrap_servers"] = ""
        return dataclasses.replace(self, **derived, **changes)

    def as_env(self) -> dict[str, str]:
        """``KAPPA_*`` variables that make ``Settings.from_env()`` in a child process equal these settings."""
        return {_env_name(f.name): _env_value(getattr(self, f.name)) for f in dataclasses.fields(self)}


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine's loopback interface (``localhost``, 127.0.0.0/8, ::1, or 127.0.0.0/8
    mapped into IPv6 as Java's listening sockets show it)."""
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return (getattr(ip, "ipv4_mapped", None) or ip).is_loopback


def _absolute(path: Path) -> Path:
    """A path given relative (``KAPPA_HOME=var/mine``) is taken from the working directory the settings are read in.
    Kept relative, it would name another folder in every process started elsewhere (Airflow's tasks), and Delta
    reads ``delta.`<path>``` (the stream's views) only for an absolute path: a relative one failed the view's
    creation with "Unsupported data source type for direct query on files"."""
    return Path(os.path.abspath(path))


def _warn_unknown(environ: Mapping[str, str]) -> None:
    """A ``KAPPA_*`` variable that names no setting is ignored, and said once per process: a misspelled one
    (``KAPPA_TRIGER_INTERVAL_S``) would otherwise leave its default in force without a word. A warning, not an
    error, so that an environment still carrying a setting a newer version dropped keeps working."""
    known = [_env_name(f.name) for f in dataclasses.fields(Settings)]
    for name in sorted(n for n in environ if n.startswith(ENV_PREFIX) and n not in known):
        if name in _WARNED_UNKNOWN:
            continue
        _WARNED_UNKNOWN.add(name)
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        log.warning("%s is not a setting%s; it is ignored (docs/settings.md lists them)", name, hint)


_WARNED_UNKNOWN: set[str] = set()


def _env_value(value: Any) -> str:
    """A child process needs a secret's value itself, not its mask."""
    return value.reveal() if isinstance(value, Secret) else str(value)


def _env_name(field_name: str) -> str:
    return ENV_PREFIX + field_name.upper()


def _coerce(name: str, raw: str, type_hint: Any) -> Any:
    env = _env_name(name)
    text = raw.strip()
    if type_hint is Path or type_hint == "Path" or name in LOCATION_FIELDS:
        if not text:
            raise SettingsError(f"{env} must be a path, got an empty value")
        return text if name in LOCATION_FIELDS else Path(text).expanduser()
    if type_hint is bool:
        lowered = text.lower()
        if lowered in {"1", "true", "yes", "on"}:
            return True
        if lowered in {"0", "false", "no", "off"}:
            return False
        raise SettingsError(f"{env} must be true or false, got {raw!r}")
    if type_hint is int:
        try:
            return int(text.replace("_", ""))
        except ValueError:
            raise SettingsError(f"{env} must be an integer, got {raw!r}") from None
    if type_hint is Secret:
        return Secret(text)
    if type_hint is float:
        try:
            return float(text)
        except ValueError:
            raise SettingsError(f"{env} must be a number, got {raw!r}") from None
    return text


# Fields that may name a folder on object storage as well as a local one.
LOCATION_FIELDS = frozenset({"warehouse_dir", "checkpoint_root"})

# Where the embedded S3-compatible server keeps the secret key it generated, under ``s3_dir``.
S3_CREDENTIALS_FILE = "credentials"

# Addresses the platform's own services bind to (the broker, the local cluster, Airflow).
LISTEN_HOST_FIELDS = ("kafka_host", "airflow_host", "catalog_host", "sql_host", "spark_driver_bind_address",
                      "spark_driver_host")

# Fields whose value is a credential: docs/settings.md names their variable and never their value.
SECRET_FIELDS = frozenset({"alert_webhook_url", "alert_slack_webhook_url", "alert_pagerduty_routing_key",
                           "s3_secret_key"})

# One line per field, rendered into docs/settings.md by ``spark_apps.core.settings_reference`` (run `make docs`).
# Documentation only: nothing here changes a default or how a value is read.
FIELD_DOCS: dict[str, str] = {
    "home": "Root of every generated folder below (the ignored var/ folder).",
    "warehouse_dir": "Delta tables at `<warehouse>/<schema>.db/<table>`, registered by name in the catalog; "
                     "`s3a://<bucket>/<folder>` puts them on the object store at `KAPPA_S3_ENDPOINT`.",
    "spark_driver_bind_address": "The address a Spark driver listens on (loopback unless KAPPA_ALLOW_REMOTE=true).",
    "spark_driver_host": "The address a Spark driver's executors reach it at: another host's executors need a "
                         "reachable one (with KAPPA_ALLOW_REMOTE=true).",
    "table_lock_timeout_s": "How long a write to a table on object storage waits for another process's write to it "
                            "(one writer per table at a time, through the catalog database).",
    "checkpoint_root": "Structured Streaming checkpoints, one folder per pipeline (and replay generation); local "
                       "or `s3a://<bucket>/<folder>`.",
    "spark_jars_dir": "Delta and the Spark Kafka connector, fetched by Maven (make jars).",
    "kafka_jars_dir": "Apache Kafka's broker jars for the embedded broker, fetched by Maven (make jars).",
    "kafka_data_dir": "The embedded broker's data, logs and pid file.",
    "catalog_jars_dir": "Derby's network server and client driver for the catalog, fetched by Maven (make jars).",
    "s3_jars_dir": "The S3-compatible server the project starts (S3Proxy), fetched by Maven (make jars).",
    "spark_class_archive": "The Spark driver's class-data-sharing archive (make jars builds it); a driver maps it "
                           "to start faster, and starts as before without it.",
    "catalog_dir": "The catalog database (Hive metastore on Derby), its server's log and pid file.",
    "s3_dir": "The embedded S3-compatible server (S3Proxy): its buckets, log, pid file and generated credentials.",
    "log_dir": "Logs of processes the platform starts (the supervised stream, Airflow).",
    "reports_dir": "HTML reconciliation reports (`reconciliation/<pipeline>-<run id>.html`, `<pipeline>-latest.html`).",
    "gx_dir": "The Great Expectations project: suites, validation results, Data Docs.",
    "run_dir": "Pid files, heartbeats and the supervisor's state.",
    "alerts_outbox": "Alerts raised without Spark, until the next Spark command records them in audit.alerts.",
    "alerts_incidents": "The incidents open now, by dedup key: what a condition that clears resolves.",
    "browser": "The headless browser that checks pages and takes `kappa report --screenshot` (Debian's chromium).",
    "airflow_home": "Airflow's home: SQLite metadata database, logs, the generated admin password.",
    "dbt_target_dir": "dbt's artifacts, a folder per pipeline: run_results.json, compiled SQL, the docs site.",
    "dbt_log_dir": "dbt's log, a folder per pipeline.",
    "chaos_dir": "The chaos lab's labs, logs, results.json and report.html.",
    "cluster_dir": "State, logs and cluster.env of `kappa cluster up`.",
    "expectations_dir": "Per-table data-quality rules for Great Expectations (`<pipeline>/<table>.json`).",
    "dbt_project_dir": "The dbt project over the serving views.",
    "kafka_host": "Host the embedded broker (and the local cluster) listens on.",
    "kafka_port": "Client port of the embedded broker.",
    "kafka_controller_port": "KRaft controller port of the embedded broker; must differ from the client port.",
    "kafka_heap": "JVM heap of the embedded broker.",
    "kafka_start_timeout_s": "Seconds to wait for the embedded broker to accept connections.",
    "catalog_host": "Host the catalog database server listens on.",
    "catalog_port": "Port of the catalog database server (Derby network protocol).",
    "catalog_start_timeout_s": "Seconds to wait for the catalog database server to accept connections.",
    "s3_endpoint": "An S3-compatible endpoint (http://host:port) for s3a:// paths; empty: s3a:// is not configured.",
    "s3_access_key": "The access key id for the S3 endpoint (the embedded server's identity).",
    "s3_secret_key": "The secret key for the S3 endpoint; empty: the one the embedded server generated (KAPPA_S3_DIR).",
    "s3_host": "Host the embedded S3-compatible server listens on.",
    "s3_port": "Port of the embedded S3-compatible server.",
    "s3_start_timeout_s": "Seconds to wait for the embedded S3-compatible server to answer.",
    "s3_retries": "How often Spark's S3A client retries a request the object store did not answer, at each of its "
                  "two levels (`fs.s3a.attempts.maximum`, `fs.s3a.retry.limit`), before the command fails.",
    "sql_host": "Host the SQL endpoint (Spark Thrift Server) listens on.",
    "sql_port": "Port of the SQL endpoint: `jdbc:hive2://<sql_host>:<sql_port>/default`.",
    "sql_start_timeout_s": "Seconds to wait for the SQL endpoint to accept connections.",
    "kafka_bootstrap_servers": "Brokers the apps use (host:port,...); empty: KAPPA_KAFKA_HOST:KAPPA_KAFKA_PORT.",
    "events_topic": "Source topic of a pipeline that names none itself.",
    "topic_partitions": "Partitions of a topic `kappa topic` creates.",
    "topic_replication_factor": "Copies of each partition of a created topic; -1: the brokers' default.",
    "topic_min_insync_replicas": "Replicas that must hold a record for an acks=all write; 0: the brokers' default.",
    "spark_master": "Spark master URL: local[n], spark://host:port, k8s://..., yarn.",
    "spark_driver_memory": "Memory of the Spark driver.",
    "spark_driver_java_options": "More JVM options for the Spark driver (a profiler, a flight recording).",
    "spark_shuffle_partitions": "spark.sql.shuffle.partitions of every session.",
    "delta_snapshot_partitions": "Tasks of each Spark job that rebuilds or filters a Delta table's file list; "
                                 "each task generates its code anew, so 1 is fastest up to thousands of files.",
    "spark_ui_enabled": "Start Spark's web UI.",
    "spark_executor_memory": "Each executor's memory on a cluster master (not local[...]).",
    "spark_cores_max": "Cores one app may take on a cluster master; 0 takes all offered.",
    "cluster_kafka_nodes": "Broker + controller nodes of `kappa cluster up` (min.insync.replicas: a majority).",
    "cluster_kafka_port": "Client port of cluster node 1; node n listens on this + n - 1.",
    "cluster_controller_port": "Controller port of cluster node 1; node n listens on this + n - 1.",
    "cluster_spark_master_port": "Port of the local cluster's Spark standalone master.",
    "cluster_spark_ui_port": "Web UI port of the local cluster's Spark master.",
    "cluster_spark_workers": "Spark workers of the local cluster, one core each.",
    "allowed_lateness_s": "Allowed lateness of a pipeline that declares none, in seconds (docs/pipelines.md).",
    "max_offsets_per_trigger": "Most log records one micro-batch reads.",
    "trigger_interval_s": "Processing-time trigger of `kappa stream --continuous`, in seconds.",
    "pipeline": "The pipeline the commands use: an entry-point name of group kappa.pipelines, or module:attribute.",
    "reconcile_buckets": "Key-hash buckets the diff fingerprints first, for tables without window_start.",
    "fault_inject": "Test/chaos hook: `<stage>@<batch id>[:kill|:enospc]` stops the stream at that point.",
    "alert_webhook_url": "Generic webhook that receives every alert as JSON; empty: not configured.",
    "alert_slack_webhook_url": "Slack incoming webhook for alerts; empty: not configured.",
    "alert_pagerduty_routing_key": "PagerDuty Events API v2 routing key for alerts; empty: not configured.",
    "alert_pagerduty_url": "PagerDuty Events API v2 endpoint.",
    "alert_timeout_s": "Timeout of one delivery to an alert sink, in seconds.",
    "alert_retries": "Retries of a failed delivery (connection error, 5xx, 429) per sink.",
    "supervise_every_min": "How often the kappa_<pipeline>_stream_supervisor DAG checks the stream, in minutes.",
    "stream_stall_s": "The stream is stalled when it made no progress for this many seconds.",
    "max_lag_records": "The stream is lagging beyond this many records behind the log end (critical at ten times).",
    "crash_loop_restarts": "Restarts by the supervisor within KAPPA_CRASH_LOOP_WINDOW_S that make a crash loop "
                           "(a critical page instead of a warning).",
    "crash_loop_window_s": "The window, in seconds, in which KAPPA_CRASH_LOOP_RESTARTS restarts are a crash loop.",
    "dead_letter_max_ratio": "Dead letters above this share of the records the stream read within "
                             "KAPPA_DEAD_LETTER_WINDOW_S raise an alert (critical above one half).",
    "dead_letter_window_s": "The window, in seconds, over which the stream's heartbeat counts records, dead "
                            "letters and future events.",
    "future_skew_s": "An event whose time is more than this many seconds after the broker appended it counts as "
                     "from the future: the supervisor raises an alert, the event stays in the tables.",
    "serving_exact_runs": "Consecutive exact reconciliations of distinct batches before a gold table serves kappa.",
    "serving_min_span_s": "Those runs must span at least this many seconds.",
    "reconcile_schedule": "Schedule of the kappa_<pipeline>_reconcile DAG.",
    "reconcile_deadline_s": "A kappa_<pipeline>_reconcile run not finished this many seconds after it was queued pages "
                            "on-call (an Airflow Deadline Alert); the run goes on. 0: no deadline.",
    "dbt_schedule": "Cron schedule (UTC) on which the kappa_<pipeline>_dbt DAG runs besides every reconciliation.",
    "kappa_audit_every_s": "Once every gold table serves kappa, the batch audits only this often, in seconds.",
    "full_audit_every_s": "A scheduled audit recomputes the whole log when its last full run is this old, in seconds; "
                          "it extends the last verified run incrementally otherwise.",
    "maintenance_schedule": "Schedule of the kappa_<pipeline>_maintenance DAG.",
    "vacuum_retention_hours": "VACUUM keeps files every version of this many hours needs; at least 168.",
    "compaction_schedule": "Schedule of the kappa_<pipeline>_compaction DAG, which folds the stream's store (the "
                           "tail of every gold table's rows) off the hot path.",
    "compaction_epoch_batches": "The stream's store groups its rows in epochs of this many micro-batches; "
                                "compaction folds whole epochs, never the one the stream is appending to.",
    "compaction_in_stream": "The stream compacts its own store whenever an epoch ends, in a process of its own, "
                            "besides the compaction DAG.",
    "compaction_tail_ratio": "The stream compacts a gold table when its tail adds at least this share to the cost "
                             "of a full scan of its base (the DAG and `kappa compact` compact any tail).",
    "compaction_nice": "CPU priority (`nice`, 0-19) of the stream's compaction process: at 19 it takes only the "
                       "cores the micro-batches leave.",
    "task_retries": "Retries of an Airflow task before it fails and pages on-call.",
    "task_retry_delay_s": "Delay between Airflow task retries, in seconds.",
    "task_timeout_s": "Longest an Airflow task may run before it fails and pages (the supervisor's: its interval).",
    "airflow_host": "Address the Airflow API server and log server bind to.",
    "allow_remote": "Let KAPPA_KAFKA_HOST and KAPPA_AIRFLOW_HOST name a non-loopback address, to listen beyond "
                    "this machine.",
    "airflow_port": "Port of the Airflow API server (the UI).",
    "airflow_log_server_port": "Port of the one loopback log server for task and triggerer logs.",
}
