"""The supervisor against a real broker that stops and comes back: it pages that the stream cannot be supervised
while the log cannot be read, and resolves that incident, with the same dedup key, once the broker is back.

The broker is one of the test's own (own home and ports), so the session's broker and its other tests never see it
stop. The stream's last run is the heartbeat such a run leaves: it read the log to its end and ended as asked."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from spark_apps.core.paths import heartbeat_path
from spark_apps.io.topics import describe_log, ensure_topic
from spark_apps.ops.supervisor import supervise
from spark_apps.services.broker import EmbeddedBroker
from spark_apps.services.processes import free_port
from spark_apps.target.resolution import declared

pytestmark = pytest.mark.integration


def test_the_supervisor_pages_when_the_real_broker_stops_and_resolves_when_it_is_back(settings, tmp_path, webhook):
    own = settings.with_overrides(home=tmp_path, kafka_port=free_port(), kafka_controller_port=free_port(),
                                  events_topic=f"test.blind.{uuid.uuid4().hex[:8]}", pipeline="marketplace",
                                  alert_webhook_url=f"{webhook.url}/blind")
    broker = EmbeddedBroker(own, stop_with_parent=True)
    broker.start()
    try:
        ensure_topic(own, own.events_topic, 1)
        log = describe_log(own, own.events_topic)
        target = declared(own)
        beat = heartbeat_path(own, target.name)
        beat.parent.mkdir(parents=True, exist_ok=True)
        beat.write_text(json.dumps({
            "written_at_epoch_s": time.time(), "topic_id": log.topic_id, "query_active": False, "ended": "caught_up",
            "last_batch_id": 0, "end_offsets": {own.events_topic: {"0": 0}}}))

        assert supervise(own, target, start=False).status == "stopped"
        broker.stop()
        blind = supervise(own, target, start=False)
        broker.start()
        back = supervise(own, target, start=False)
    finally:
        broker.stop()

    assert blind.status == "blind", blind.detail
    assert back.status == "stopped", back.detail
    sent = [(body["severity"], body["dedup_key"], body["action"]) for body in webhook.bodies("/blind")]
    assert sent == [("critical", "stream:marketplace:blind", "trigger"),
                    ("info", "stream:marketplace:blind", "resolve")]
