"""The replayable log: the generator's manifest matches what the broker stored."""

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from kafka import KafkaConsumer, TopicPartition

from spark_apps.core.waiting import wait_for
from spark_apps.io.log_identity import LogRewound, log_problem, record_source
from spark_apps.io.producer import produce, send
from spark_apps.io.topics import admin_client, describe_log, ensure_topic, partition_offsets
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.pipeline.synthetic import GeneratorRequest, Manifest
from tests.support.expected import event_time

pytestmark = pytest.mark.integration
UTC = dt.UTC


def read_log(settings, topic):
    consumer = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=4000)
    consumer.assign([TopicPartition(topic, p) for p in range(settings.topic_partitions)])
    records = list(consumer)
    consumer.close()
    return records


def log_size(settings, topic) -> int:
    return sum(end for _, end in partition_offsets(settings, topic).values())


def test_manifest_agrees_with_the_records_read_back_from_the_broker(kafka_broker, topic, settings, tmp_path):
    request = GeneratorRequest(seed=11, events=4000, base_time_ms=int(time.time()) * 1000,
                               allowed_lateness_s=settings.allowed_lateness_s, hard_cases=True)
    result = produce(settings.with_overrides(events_topic=topic), PIPELINE, request, topic=topic,
                     manifest_path=tmp_path / "manifest.json", show_progress=False)
    manifest = Manifest.from_json(tmp_path / "manifest.json")
    assert result.sent == manifest.total_records == 4000

    log = read_log(settings, topic)
    generated = {r.seq: r for r in PIPELINE.generator(request)}
    assert Counter((r.key, r.value) for r in log) == Counter((g.key, g.value) for g in generated.values())

    by_value = {}
    for record in log:
        by_value.setdefault(record.value, record)
    for entry in manifest.records:
        record = by_value[generated[entry["seq"]].value]
        assert record.timestamp_type == 1, "the topic must stamp LogAppendTime"
        if entry["kind"] not in ("valid", "late"):
            continue
        payload = (manifest.valid_events | manifest.late_events)[entry["event_id"]]
        lag_s = record.timestamp / 1000 - event_time(payload).timestamp()
        is_late = lag_s > settings.allowed_lateness_s
        assert is_late == (entry["kind"] == "late"), f"seq {entry['seq']}: lag {lag_s:.0f}s vs its label"
    assert {k for k, n in manifest.counts_by_kind.items() if n} == {"valid", "late", "duplicate", "conflict",
                                                                    "malformed"}
    assert len(set(r.key for r in log if r.value in {generated[s].value for s in manifest.duplicates})) > 0


def test_a_run_without_a_manifest_sends_every_record_and_keeps_none_of_them(kafka_broker, topic, settings):
    """The bench sends millions of events: a run that kept them for a manifest ran out of memory at 10M."""
    request = GeneratorRequest(seed=12, events=3000, base_time_ms=int(time.time()) * 1000,
                               allowed_lateness_s=settings.allowed_lateness_s)
    result = produce(settings.with_overrides(events_topic=topic), PIPELINE, request, topic=topic,
                     show_progress=False, with_manifest=False)
    assert (result.sent, result.manifest) == (3000, None)
    assert log_size(settings, topic) == 3000
    kept, count, _, _ = send(settings, topic, PIPELINE.generator(request), 3000, show_progress=False, keep=False)
    assert (kept, count) == ([], 3000)


def test_a_killed_producer_rerun_with_the_same_seed_only_repeats_its_prefix(kafka_broker, topic, settings):
    base = int(time.time()) * 1000
    command = [sys.executable, "-m", "spark_apps.cli", "produce", "--topic", topic, "--seed", "5",
               "--events", "3000", "--base-time-ms", str(base)]
    env = {**os.environ, "KAPPA_KAFKA_BOOTSTRAP_SERVERS": settings.kafka_bootstrap_servers,
           "KAPPA_HOME": str(settings.home)}
    slow = subprocess.Popen([*command, "--rate", "200"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    wait_for(lambda: log_size(settings, topic) >= 300, "the slow producer's first 300 records", 60, every_s=0.2)
    slow.send_signal(signal.SIGKILL)
    slow.wait()
    # Requests already on the wire may still be appended: wait until the log has stopped growing.
    sizes = [log_size(settings, topic)]
    wait_for(lambda: sizes.append(log_size(settings, topic)) or sizes[-1] == sizes[-2], "the log to stop growing",
             30, every_s=1.0)
    first_run = read_log(settings, topic)
    assert 0 < len(first_run) < 3000

    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    assert "produced 3,000 records" in finished.stdout

    request = GeneratorRequest(seed=5, events=3000, base_time_ms=base, allowed_lateness_s=settings.allowed_lateness_s)
    expected = Counter((g.key, g.value) for g in PIPELINE.generator(request))
    stored = Counter((r.key, r.value) for r in read_log(settings, topic))
    prefix = Counter((r.key, r.value) for r in first_run)
    assert stored == expected + prefix, "the log holds one full run plus exactly the killed run's prefix"


def test_producer_reports_an_unreachable_broker_in_one_line(settings):
    env = {**os.environ, "KAPPA_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "KAPPA_HOME": str(settings.home)}
    done = subprocess.run([sys.executable, "-m", "spark_apps.cli", "produce", "--events", "10"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert "cannot reach Kafka at 127.0.0.1:1" in done.stderr


def test_produce_file_lands_every_event_of_a_json_lines_file_in_the_topic_keyed_by_entity(kafka_broker, topic,
                                                                                          settings, tmp_path):
    events = [{"event_id": f"f{n}", "event_type": "order_placed", "event_time": "2026-11-21T19:22:03.123Z",
               "schema_version": 1, "order_id": f"o{n % 7}", "customer_id": "c1", "merchant_id": "m1",
               "amount_cents": 100 + n, "currency": "EUR", "item_count": 1} for n in range(40)]
    lines = [json.dumps(event, separators=(",", ":")) for event in events]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n")
    env = {**os.environ, **settings.as_env()}
    done = subprocess.run([sys.executable, "-m", "spark_apps.cli", "produce", "--file", str(path), "--topic", topic,
                           "--accept-late"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"produced 40 records to {topic}" in done.stdout and f"from {path}" in done.stdout
    assert done.stdout.strip().endswith("the stream's parser dead-letters none of them"), done.stdout

    assert sum(end for _, end in partition_offsets(settings, topic).values()) == 40, "acks=all: all are in the log"
    stored = Counter((r.key, r.value) for r in read_log(settings, topic))
    assert stored == Counter((event["order_id"].encode(), line.encode()) for event, line in zip(events, lines,
                                                                                                  strict=True))


def test_records_over_the_topic_limit_are_named_in_one_line_and_every_other_record_is_sent(kafka_broker, topic,
                                                                                          settings, tmp_path):
    events = [{"event_id": f"big{n}", "event_type": "order_placed", "event_time": "2026-11-21T19:22:03.123Z",
               "order_id": f"o{n}", "note": "x" * (1_200_000 if n in (4, 8) else 10)} for n in range(1, 11)]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(event) + "\n" for event in events))
    env = {**os.environ, "KAPPA_KAFKA_BOOTSTRAP_SERVERS": settings.kafka_bootstrap_servers,
           "KAPPA_HOME": str(settings.home)}
    done = subprocess.run([sys.executable, "-m", "spark_apps.cli", "produce", "--file", str(path), "--topic", topic,
                           "--accept-late"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    error = done.stderr.strip().splitlines()[-1]  # after the progress line, which counts the 8 sent
    assert error.startswith("kappa produce: error: ")
    assert (f"2 of 10 records were not sent: larger than topic {topic}'s max.message.bytes (1,048,588 bytes); "
            "record number 4, 8. The other 8 were sent and acknowledged.") in error
    assert sorted(json.loads(r.value)["event_id"] for r in read_log(settings, topic)) == sorted(
        f"big{n}" for n in (1, 2, 3, 5, 6, 7, 9, 10))


def test_a_deleted_topic_a_stream_has_read_is_never_recreated_and_a_recreated_one_shows_a_new_id(
        kafka_broker, topic, isolated_home):
    settings = isolated_home.with_overrides(events_topic=topic)
    first = describe_log(settings, topic)
    assert first.topic_id and first.log_end == {p: 0 for p in range(settings.topic_partitions)}
    record_source(settings.checkpoint_root / "marketplace", topic, first.topic_id)
    with admin_client(settings) as admin:
        admin.delete_topics([topic])
    wait_for(lambda: not describe_log(settings, topic).offsets, "the topic to be deleted", 30)
    with pytest.raises(LogRewound, match=f"topic {topic}, which the stream has read, no longer exists, and creating "
                                         "it again would restart its offsets at 0"):
        ensure_topic(settings, topic)
    assert not describe_log(settings, topic).offsets, "nothing was created"

    with admin_client(settings) as admin:
        admin.create_topics({topic: {"num_partitions": settings.topic_partitions, "replication_factor": 1}},
                            wait_for_metadata=True)
    again = describe_log(settings, topic)
    assert again.topic_id not in (None, first.topic_id)
    assert "it was deleted and recreated" in log_problem(topic, first.topic_id, again.topic_id, {0: 3},
                                                         again.log_end)
