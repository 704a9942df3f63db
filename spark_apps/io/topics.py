"""The event log's topics: created once with the settings replay depends on, and checked after.

A topic must keep every record forever (``retention.ms=-1``) and stamp each one with the broker's
append time (``message.timestamp.type=LogAppendTime``): the lateness rule and every recompute read
that time from the log, so a topic without these settings would make replay inexact. On a cluster the
settings also ask for durability (``KAPPA_TOPIC_REPLICATION_FACTOR``, ``KAPPA_TOPIC_MIN_INSYNC_REPLICAS``):
a log that loses an acknowledged record when one broker dies cannot be the system of record either.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from spark_apps.core.errors import BrokerError, TopicConfigError
from spark_apps.core.settings import Settings
from spark_apps.io.log_identity import checkpoints_reading, refusal

REQUIRED_TOPIC_CONFIGS = {
    "message.timestamp.type": "LogAppendTime",
    "retention.ms": "-1",
    "retention.bytes": "-1",
    "cleanup.policy": "delete",
}


# Kafka's default message.max.bytes: 1 MiB plus the 12-byte record batch log overhead.
BROKER_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588


@contextmanager
def admin_client(settings: Settings) -> Iterator:
    """A kafka-python admin client; an unreachable broker becomes one readable error."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    try:
        # Creating a topic replicated to three brokers can take more than 10 s on a busy machine.
        admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers,
                                 client_id="kappa-admin", request_timeout_ms=30_000, bootstrap_timeout_ms=10_000)
    except KafkaError as exc:
        raise BrokerError(f"cannot reach Kafka at {settings.kafka_bootstrap_servers} ({exc}); "
                          "is it running? `make up` starts the embedded broker") from None
    try:
        yield admin
    finally:
        admin.close()


@dataclass(frozen=True)
class TopicState:
    """What ``ensure_topic`` found or made."""

    name: str
    partitions: int
    created: bool


def ensure_topic(settings: Settings, name: str | None = None, partitions: int | None = None) -> TopicState:
    """Create the topic if absent; refuse an existing one whose configuration breaks exact replay."""
    from kafka.errors import TopicAlreadyExistsError

    name = name or settings.events_topic
    partitions = partitions or settings.topic_partitions
    with admin_client(settings) as admin:
        created = False
        if name not in admin.list_topics():
            _refuse_recreating(settings, name)
            try:
                admin.create_topics(
                    {name: {"num_partitions": partitions, "replication_factor": settings.topic_replication_factor,
                            "configs": {**REQUIRED_TOPIC_CONFIGS, **durability_configs(settings)}}},
                    wait_for_metadata=True)
                created = True
            except TopicAlreadyExistsError:
                created = False
        check_topic_config(admin, name)
        described = admin.describe_topics([name])[0]["partitions"]
        check_topic_durability(admin, name, described, settings)
    return TopicState(name=name, partitions=len(described), created=created)


def _refuse_recreating(settings: Settings, name: str) -> None:
    """A missing topic that a stream's checkpoint has read was deleted: creating it again would restart its offsets
    at 0 under the stream, so it is refused (see ``log_identity``)."""
    readers = checkpoints_reading(settings.checkpoint_root, name)
    if readers:
        raise refusal(f"topic {name}, which the stream has read, no longer exists, and creating it again would "
                      "restart its offsets at 0", readers[0])


def durability_configs(settings: Settings) -> dict[str, str]:
    """The topic configs the durability settings ask for (none: the brokers' defaults)."""
    wanted = settings.topic_min_insync_replicas
    return {"min.insync.replicas": str(wanted)} if wanted else {}


def check_topic_durability(admin, name: str, partitions: list[dict], settings: Settings) -> None:
    """Refuse a topic with fewer replicas or a lower min.insync.replicas than the settings ask for: it would lose
    acknowledged records when a broker dies, however exactly it replays."""
    replicas = min(len(p["replica_nodes"]) for p in partitions)
    wanted_replicas = settings.topic_replication_factor
    wrong = [f"{replicas} replicas (needs {wanted_replicas})"] if replicas < wanted_replicas else []
    wanted_isr = settings.topic_min_insync_replicas
    if wanted_isr:
        actual_isr = int(topic_configs(admin, name).get("min.insync.replicas", "1"))
        if actual_isr < wanted_isr:
            wrong.append(f"min.insync.replicas={actual_isr} (needs {wanted_isr})")
    if wrong:
        raise TopicConfigError(f"topic {name!r} is less durable than the settings ask: " + ", ".join(wrong)
                               + "; recreate it, the platform never changes an existing topic")


def topic_configs(admin, name: str) -> dict[str, str]:
    """The effective configuration of one topic (defaults included)."""
    from kafka.admin import ConfigResource, ConfigResourceType

    result = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)], config_filter="all")
    entries = result["topic"][name]
    return {key: str(entry["value"] if isinstance(entry, dict) else entry) for key, entry in entries.items()}


def max_message_bytes(settings: Settings, name: str) -> int:
    """The largest record batch the topic accepts (its ``max.message.bytes``); the broker's default when the topic
    does not exist yet (a producer may create it)."""
    from kafka.errors import KafkaError

    with admin_client(settings) as admin:
        try:
            return int(topic_configs(admin, name)["max.message.bytes"])
        except (KafkaError, KeyError):
            return BROKER_DEFAULT_MAX_MESSAGE_BYTES


def check_topic_config(admin, name: str) -> None:
    """Raise TopicConfigError naming every setting that differs from what replay needs."""
    actual = topic_configs(admin, name)
    wrong = [f"{key}={actual.get(key)!s} (needs {want})"
             for key, want in REQUIRED_TOPIC_CONFIGS.items() if actual.get(key) != want]
    if wrong:
        raise TopicConfigError(
            f"topic {name!r} cannot serve as a replayable log: " + ", ".join(wrong)
            + "; recreate it or alter its config, the platform never changes an existing topic")


def partition_offsets(settings: Settings, topic: str | None = None) -> dict[int, tuple[int, int]]:
    """Per partition: (earliest offset still in the log, next offset to be written)."""
    return describe_log(settings, topic).offsets


@dataclass(frozen=True)
class LogState:
    """A topic as the broker has it now: its id (None when the topic does not exist) and, per partition, (earliest
    offset still in the log, next offset to be written)."""

    topic: str
    topic_id: str | None
    offsets: dict[int, tuple[int, int]]

    @property
    def log_end(self) -> dict[int, int]:
        return {p: end for p, (_, end) in self.offsets.items()}


# The id Kafka reports for a topic it does not know (KIP-516's zero UUID).
NO_TOPIC_ID = "00000000-0000-0000-0000-000000000000"


def describe_log(settings: Settings, topic: str | None = None) -> LogState:
    """The topic's id and offsets. A topic deleted and recreated under the same name gets a new id and offsets
    that start again at 0, which is how the stream and the supervisor tell it from the one they read."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    topic = topic or settings.events_topic
    with admin_client(settings) as admin:
        described = admin.describe_topics([topic])[0]
        parts = [TopicPartition(topic, p["partition_index"]) for p in described["partitions"]]
        earliest = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST for tp in parts}) if parts else {}
        latest = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in parts}) if parts else {}
    topic_id = str(described.get("topic_id") or "") or None
    return LogState(topic, None if not parts or topic_id == NO_TOPIC_ID else topic_id,
                    {tp.partition: (earliest[tp].offset, latest[tp].offset) for tp in sorted(parts)})
