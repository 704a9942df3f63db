"""The stream as on-call runs it: `kappa stream --continuous` in its own process, stopped by SIGTERM."""

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from spark_apps.core.settings import is_loopback
from spark_apps.core.waiting import poll
from spark_apps.io.event_files import FileRecord
from spark_apps.io.producer import produce, send
from spark_apps.io.topics import describe_log
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.pipeline.synthetic import GeneratorRequest
from tests.support.sockets import listening_addresses, process_tree

pytestmark = pytest.mark.integration


def test_continuous_stream_writes_a_heartbeat_listens_on_loopback_only_and_stops_cleanly_on_sigterm(
        kafka_broker, make_topic, settings, tmp_path):
    topic = make_topic("test.stream.cli")
    produced = produce(settings.with_overrides(events_topic=topic), PIPELINE,
                       GeneratorRequest(seed=21, events=400, base_time_ms=int(time.time()) * 1000), show_progress=False)
    send(settings, topic, events_from_the_future(produced.manifest, 3), total=3, show_progress=False)
    env = {**os.environ, "KAPPA_HOME": str(tmp_path), "KAPPA_KAFKA_BOOTSTRAP_SERVERS": settings.kafka_bootstrap_servers,
           "KAPPA_CATALOG_PORT": str(settings.catalog_port), "KAPPA_EVENTS_TOPIC": topic,
           "KAPPA_SPARK_JARS_DIR": str(settings.spark_jars_dir),
           "KAPPA_SPARK_SHUFFLE_PARTITIONS": "2", "KAPPA_TRIGGER_INTERVAL_S": "1", "KAPPA_SPARK_UI_ENABLED": "true"}
    stream = subprocess.Popen([sys.executable, "-m", "spark_apps.cli", "stream", "--continuous"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    heartbeat = tmp_path / "run" / "marketplace.heartbeat.json"
    try:
        def first_batch() -> dict | None:
            """The first heartbeat with a batch, or, when the stream has exited, a non-empty answer at once."""
            if stream.poll() is not None:
                return {"exited": stream.returncode}
            beat = json.loads(heartbeat.read_text()) if heartbeat.exists() else {}
            return beat if beat.get("last_batch_id") is not None else None

        beat = poll(first_batch, timeout_s=480, every_s=1) or {}  # a hang guard: two busy cores can take minutes
        assert stream.poll() is None, f"the stream exited with {stream.returncode}: {stream.stderr.read()[-3000:]}"
        assert beat.get("last_batch_id") == 0 and beat["last_batch_records"] == 403, stream.stderr
        assert sum(beat["end_offsets"][topic].values()) == 403, "offsets are JSON numbers, not a JSON string"
        malformed = len(produced.manifest.malformed)
        assert beat["window"] == {"seconds": settings.dead_letter_window_s, "records": 403, "dead_letters": malformed,
                                  "future_events": 3}
        assert beat["topic_id"] == describe_log(settings, topic).topic_id, "the supervisor compares it with the broker"
        # The broker and the stream with its UI on (driver, block manager, UI, Python workers): loopback only.
        listening = listening_addresses(process_tree(stream.pid) | {kafka_broker.pid()})
        assert len(listening) >= 4 and all(is_loopback(address) for address, _ in listening), listening
        stream.send_signal(signal.SIGTERM)
        out, err = stream.communicate(timeout=120)
    finally:
        if stream.poll() is None:
            stream.kill()
    assert stream.returncode == 0, err[-2000:]
    assert "stream marketplace: 1 micro-batches, 403 records" in out

    lineage = subprocess.run([sys.executable, "-m", "spark_apps.cli", "lineage", "--table", "gold.merchant_revenue"],
                             env=env, capture_output=True, text=True, timeout=240)
    assert lineage.returncode == 0, lineage.stderr[-2000:]
    ends = {f"p{p}" for p in range(settings.topic_partitions)}
    assert lineage.stdout.startswith("gold.merchant_revenue version 1: batch 0 of kappa-marketplace-")
    assert all(f"{p}=[0," in lineage.stdout for p in ends)


def events_from_the_future(manifest, count: int) -> list[FileRecord]:
    """Copies of valid events with new ids, stamped a day after now: what a producer with a wrong clock sends."""
    ahead = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
    records = []
    for number, event in enumerate(list(manifest.valid_events.values())[:count]):
        payload = {**event, "event_id": f"{event['event_id']}-future-{number}",
                   "event_time": ahead.strftime("%Y-%m-%dT%H:%M:%S.000Z")}
        records.append(FileRecord(number, event["order_id"].encode(), json.dumps(payload).encode()))
    return records


def test_lineage_of_a_missing_table_is_one_line(settings, tmp_path):
    env = {**os.environ, "KAPPA_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "spark_apps.cli", "lineage", "--table", "gold.nothing"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    expected = f"kappa lineage: error: no Delta table gold.nothing at {tmp_path}/warehouse/gold.db/nothing"
    assert done.stderr.strip() == expected
