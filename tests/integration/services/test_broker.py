"""The embedded KRaft broker: lifecycle, topic contract, idempotent produce/consume."""

import json

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from spark_apps.cli import main
from spark_apps.core.errors import BrokerError, TopicConfigError
from spark_apps.core.settings import Settings
from spark_apps.io.topics import (
    REQUIRED_TOPIC_CONFIGS,
    admin_client,
    ensure_topic,
    partition_offsets,
    topic_configs,
)
from spark_apps.services.broker import EmbeddedBroker
from spark_apps.services.processes import free_port

pytestmark = pytest.mark.integration


def test_idempotent_producer_round_trips_through_the_log(topic, settings):
    producer = KafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, enable_idempotence=True,
                             acks="all")
    sent = [{"n": i} for i in range(20)]
    for event in sent:
        producer.send(topic, key=str(event["n"] % 4).encode(), value=json.dumps(event).encode())
    producer.flush()
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=5000)
    consumer.assign([TopicPartition(topic, p) for p in range(settings.topic_partitions)])
    received = [json.loads(record.value) for record in consumer]
    consumer.close()
    assert sorted(received, key=lambda e: e["n"]) == sent
    offsets = partition_offsets(settings, topic)
    assert sum(end - start for start, end in offsets.values()) == len(sent)


def test_topics_are_created_with_log_append_time_and_infinite_retention(topic, settings):
    with admin_client(settings) as admin:
        configs = topic_configs(admin, topic)
    for key, value in REQUIRED_TOPIC_CONFIGS.items():
        assert configs[key] == value
    again = ensure_topic(settings, topic)
    assert again.created is False and again.partitions == settings.topic_partitions


@pytest.mark.parametrize("bad_config", [
    {"message.timestamp.type": "CreateTime"},
    {"retention.ms": "604800000"},
])
def test_a_topic_that_would_make_replay_inexact_is_refused(kafka_broker, settings, bad_config):
    name = "bad." + "-".join(f"{k}-{v}" for k, v in bad_config.items()).replace(".", "-")
    with admin_client(settings) as admin:
        admin.create_topics({name: {"num_partitions": 1, "replication_factor": -1, "configs": bad_config}})
    try:
        with pytest.raises(TopicConfigError, match=next(iter(bad_config))):
            ensure_topic(settings, name)
    finally:
        with admin_client(settings) as admin:
            admin.delete_topics([name])


def test_second_start_reuses_the_formatted_storage(tmp_path, settings):
    own = settings.with_overrides(home=tmp_path, kafka_port=free_port(), kafka_controller_port=free_port(),
                                  spark_jars_dir=settings.spark_jars_dir, kafka_jars_dir=settings.kafka_jars_dir)
    broker = EmbeddedBroker(own, stop_with_parent=True)
    broker.start()
    try:
        ensure_topic(own, "survivor")
        meta = broker.paths.formatted_marker.read_text()
        assert broker.stop() is True
        assert not broker.is_running()
        broker.start()
        assert broker.paths.formatted_marker.read_text() == meta
        with admin_client(own) as admin:
            assert "survivor" in admin.list_topics()
    finally:
        broker.stop()
    assert broker.stop() is False


def test_a_taken_port_gives_a_clear_error(kafka_broker, tmp_path, settings):
    clash = settings.with_overrides(home=tmp_path, kafka_port=settings.kafka_port,
                                    kafka_controller_port=free_port(),
                                    spark_jars_dir=settings.spark_jars_dir, kafka_jars_dir=settings.kafka_jars_dir)
    with pytest.raises(BrokerError, match=f"port {settings.kafka_port} .* is taken"):
        EmbeddedBroker(clash).start()


def test_broker_status_finds_a_running_broker_by_its_port_from_another_home(kafka_broker, tmp_path, settings,
                                                                             monkeypatch, capsys):
    for key, value in settings.with_overrides(home=tmp_path).as_env().items():
        monkeypatch.setenv(key, value)
    assert main(["broker", "status"]) == 0
    assert f"a kafka broker answers on {settings.kafka_bootstrap_servers}, started from another home" \
        in capsys.readouterr().out
    monkeypatch.setenv("KAPPA_KAFKA_PORT", str(free_port()))
    monkeypatch.delenv("KAPPA_KAFKA_BOOTSTRAP_SERVERS", raising=False)
    assert main(["broker", "status"]) == 1
    assert "kafka broker is not running on 127.0.0.1:" in capsys.readouterr().out


def test_missing_java_gives_a_clear_error(monkeypatch, tmp_path, settings):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    own = Settings(home=tmp_path, kafka_jars_dir=settings.kafka_jars_dir, kafka_port=free_port(),
                   kafka_controller_port=free_port())
    with pytest.raises(BrokerError, match="Java was not found"):
        EmbeddedBroker(own).start()
