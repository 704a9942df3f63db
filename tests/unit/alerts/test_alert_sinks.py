"""Alert sinks: payload shapes of the webhook, Slack and PagerDuty, and delivery to a real local HTTP receiver."""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from spark_apps.alerts import sinks as alert_sinks
from spark_apps.alerts.alert import Alert, resolution, runbook
from spark_apps.alerts.sinks import Delivery, deliver, pagerduty_payload, slack_payload, webhook_payload
from spark_apps.core.settings import Settings
from spark_apps.services.processes import free_port


@dataclass
class Receiver:
    """What the local endpoint received (path, Content-Type, JSON body) and the statuses it answers next."""

    url: str
    received: list[tuple[str, str, dict]] = field(default_factory=list)
    statuses: dict[str, list[int]] = field(default_factory=dict)  # path -> answers before it answers 200

    def bodies(self, path: str) -> list[dict]:
        return [body for p, _, body in self.received if p == path]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.received.append((self.path, self.headers["Content-Type"], json.loads(body)))
            pending = state.statuses.get(self.path, [])
            status = pending.pop(0) if pending else 200
            self.send_response(status)
            self.end_headers()
            self.wfile.write(b'{"status": "invalid event"}' if status == 400 else b"ok")

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(alert_sinks, "BACKOFF_S", 0.01)


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}/hook"


def sinks(tmp_path: Path, base: str, **overrides) -> Settings:
    values = dict(alert_webhook_url=f"{base}/hook", alert_slack_webhook_url=f"{base}/slack",
                  alert_pagerduty_routing_key="R0UT1NGKEY", alert_pagerduty_url=f"{base}/pagerduty",
                  alert_retries=2, alert_timeout_s=2.0)
    return Settings(home=tmp_path, **{**values, **overrides})


def an_alert(**changes) -> Alert:
    values = dict(severity="critical", summary="gold.merchant_revenue differs from the batch", source="auditor",
                  dedup_key="reconcile:marketplace:gold.merchant_revenue", table="gold.merchant_revenue",
                  offsets={0: 120, 1: 98}, versions={"gold.merchant_revenue": 7}, details={"run_id": "r1"},
                  runbook=runbook("reconciliation-mismatch"),
                  raised_at=dt.datetime(2026, 3, 1, 12, 30, tzinfo=dt.UTC))
    return Alert(**{**values, **changes})


def test_pagerduty_payload_is_an_events_v2_trigger_with_every_required_field():
    alert = an_alert()
    event = pagerduty_payload(alert, "R0UT1NGKEY")
    assert event["routing_key"] == "R0UT1NGKEY"
    assert event["event_action"] == "trigger"
    assert event["dedup_key"] == "reconcile:marketplace:gold.merchant_revenue"
    assert event["payload"] == {
        "summary": "gold.merchant_revenue differs from the batch", "source": "auditor", "severity": "critical",
        "timestamp": "2026-03-01T12:30:00+00:00", "component": "gold.merchant_revenue",
        "custom_details": {"alert_id": alert.alert_id, "offsets": {"0": 120, "1": 98},
                           "versions": {"gold.merchant_revenue": 7}, "details": {"run_id": "r1"}}}
    assert event["links"] == [{"href": "docs/runbook.md#reconciliation-mismatch", "text": "runbook"}]
    json.dumps(event)


@pytest.mark.parametrize("severity", ["critical", "error", "warning", "info"])
def test_pagerduty_severity_is_the_alert_severity(severity):
    assert pagerduty_payload(an_alert(severity=severity), "k")["payload"]["severity"] == severity


def test_an_alert_outside_pagerduty_severities_is_refused_when_created():
    with pytest.raises(ValueError, match="severity must be one of critical, error, warning, info"):
        an_alert(severity="page-everyone")


def test_pagerduty_summary_is_cut_to_1024_characters_and_a_table_less_alert_has_no_component():
    payload = pagerduty_payload(an_alert(summary="x" * 5000, table=""), "k")["payload"]
    assert len(payload["summary"]) == 1024 and payload["summary"].endswith("…")
    assert "component" not in payload


def test_slack_payload_has_fallback_text_and_blocks_with_severity_dedup_key_and_runbook():
    message = slack_payload(an_alert(summary="lost offsets <0,5> & more"))
    assert message["text"].startswith("[CRITICAL] lost offsets &lt;0,5&gt; &amp; more")
    assert "reconcile:marketplace:gold.merchant_revenue" in message["text"]
    assert "docs/runbook.md#reconciliation-mismatch" in message["text"]
    fields = [f["text"] for block in message["blocks"] for f in block.get("fields", [])]
    assert fields == ["*Severity*\ncritical", "*Table*\ngold.merchant_revenue",
                      "*Dedup key*\nreconcile:marketplace:gold.merchant_revenue", "*Offsets*\np0=120, p1=98",
                      "*Versions*\ngold.merchant_revenue=7", "*Runbook*\ndocs/runbook.md#reconciliation-mismatch"]
    assert message["blocks"][0] == {"type": "header", "text": {"type": "plain_text", "text": "CRITICAL: auditor"}}


def test_webhook_payload_is_the_whole_alert_with_an_iso_timestamp():
    alert = an_alert()
    assert json.loads(json.dumps(webhook_payload(alert))) == {
        "alert_id": alert.alert_id, "raised_at": "2026-03-01T12:30:00+00:00", "severity": "critical",
        "summary": alert.summary, "source": "auditor", "dedup_key": alert.dedup_key, "table": alert.table,
        "offsets": {"0": 120, "1": 98}, "versions": {"gold.merchant_revenue": 7}, "details": {"run_id": "r1"},
        "runbook": "docs/runbook.md#reconciliation-mismatch", "action": "trigger"}


def test_a_resolution_resolves_the_pagerduty_incident_and_tells_the_chat_sinks_it_cleared():
    cleared = resolution("stream:marketplace:down", "supervisor", "stream:marketplace:down; the stream is now ok")
    assert pagerduty_payload(cleared, "KEY") == {"routing_key": "KEY", "event_action": "resolve",
                                                 "dedup_key": "stream:marketplace:down"}
    assert slack_payload(cleared)["text"].startswith("[RESOLVED] resolved: stream:marketplace:down")
    assert webhook_payload(cleared)["action"] == "resolve" and webhook_payload(cleared)["severity"] == "info"


def test_every_configured_sink_receives_the_alert_as_json(receiver, tmp_path):
    alert = an_alert()
    deliveries = deliver(sinks(tmp_path, receiver.url), alert)
    assert deliveries == [Delivery("webhook", True, 200, "", 1), Delivery("slack", True, 200, "", 1),
                          Delivery("pagerduty", True, 200, "", 1)]
    assert {content_type for _, content_type, _ in receiver.received} == {"application/json"}
    assert receiver.bodies("/hook") == [webhook_payload(alert)]
    assert receiver.bodies("/slack") == [slack_payload(alert)]
    assert receiver.bodies("/pagerduty") == [pagerduty_payload(alert, "R0UT1NGKEY")]


@pytest.mark.parametrize("status", [500, 503, 429])
def test_a_sink_that_answers_an_error_worth_retrying_is_retried_until_it_accepts(receiver, tmp_path, status):
    receiver.statuses["/hook"] = [status, status]
    deliveries = deliver(sinks(tmp_path, receiver.url, alert_slack_webhook_url="", alert_pagerduty_routing_key=""),
                         an_alert())
    assert deliveries == [Delivery("webhook", ok=True, status=200, attempts=3)]
    assert len(receiver.bodies("/hook")) == 3


def test_retries_are_bounded_and_the_last_answer_is_the_reason(receiver, tmp_path):
    receiver.statuses["/hook"] = [500] * 10
    settings = sinks(tmp_path, receiver.url, alert_slack_webhook_url="", alert_pagerduty_routing_key="")
    assert deliver(settings.with_overrides(alert_retries=1), an_alert()) == [
        Delivery("webhook", ok=False, status=500, error="HTTP 500 Internal Server Error: ok", attempts=2)]


def test_a_client_error_is_not_retried_and_its_answer_is_kept(receiver, tmp_path):
    receiver.statuses["/pagerduty"] = [400, 400]
    pagerduty, = deliver(sinks(tmp_path, receiver.url, alert_webhook_url="", alert_slack_webhook_url=""), an_alert())
    assert pagerduty == Delivery("pagerduty", ok=False, status=400,
                                 error='HTTP 400 Bad Request: {"status": "invalid event"}', attempts=1)
    assert len(receiver.bodies("/pagerduty")) == 1


def test_a_refused_connection_fails_that_sink_only_and_is_logged_with_its_reason(receiver, tmp_path, caplog):
    alert = an_alert()
    settings = sinks(tmp_path, receiver.url, alert_webhook_url=closed_port_url(), alert_retries=1)
    with caplog.at_level(logging.ERROR, logger="spark_apps.alerts.sinks"):
        webhook, slack, pagerduty = deliver(settings, alert)
    assert (webhook.ok, webhook.status, webhook.attempts) == (False, None, 2)
    assert "Connection refused" in webhook.error
    assert slack.ok and pagerduty.ok
    assert len(receiver.bodies("/slack")) == len(receiver.bodies("/pagerduty")) == 1
    assert [r.getMessage() for r in caplog.records] == [
        f"alert {alert.alert_id} [{alert.dedup_key}] NOT delivered to webhook after 2 attempt(s): {webhook.error}"]


@pytest.mark.parametrize(("url", "error", "attempts"), [
    ("file:///etc/passwd", "the webhook URL is not http(s) (scheme 'file')", 0),
    ("http://exa mple.com/hook", "InvalidURL: the URL is malformed", 1),
    ("http://[::1/hook", "the webhook URL is malformed", 0)])
def test_a_malformed_url_is_a_failed_delivery_tried_at_most_once_not_an_exception(tmp_path, url, error, attempts):
    webhook, = deliver(Settings(home=tmp_path, alert_webhook_url=url), an_alert())
    assert (webhook.ok, webhook.attempts) == (False, attempts)
    assert webhook.error.startswith(error)


@pytest.mark.parametrize("url", ["hooks.example.com/services/T0/B0/S3CR3TT0KEN",
                                 "http://hooks.example.com/services/T0 B0/S3CR3TT0KEN?token=S3CR3TT0KEN",
                                 "https://127.0.0.1:9/hooks/S3CR3TT0KEN\tX", "http://[::1/S3CR3TT0KEN"])
def test_a_failed_delivery_never_quotes_the_token_in_the_url(tmp_path, url):
    webhook, = deliver(Settings(home=tmp_path, alert_webhook_url=url), an_alert())
    assert not webhook.ok and webhook.error
    assert "S3CR3TT0KEN" not in webhook.error and "S3CR3TT0KEN" not in repr(webhook)


def test_no_sink_configured_delivers_nothing(tmp_path):
    assert deliver(Settings(home=tmp_path), an_alert()) == []
