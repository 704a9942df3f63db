"""Dispatch without Spark (Airflow callbacks, the supervisor): the alert is logged and kept whatever the sinks do."""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from pathlib import Path

from spark_apps.alerts.alert import Alert, runbook
from spark_apps.alerts.dispatch import (
    alert_line,
    dispatch,
    open_incidents,
    outbox_line,
    outbox_rows,
    resolve,
    resolve_cleared,
)
from spark_apps.alerts.sinks import Delivery
from spark_apps.core.settings import PROJECT_ROOT, Settings
from spark_apps.services.processes import free_port
from tests.support.webhook import WebhookReceiver


def closed_port_url(path: str) -> str:
    return f"http://127.0.0.1:{free_port()}{path}"


def stream_down(**changes) -> Alert:
    values = dict(severity="critical", summary="stream marketplace is down", source="supervisor",
                  dedup_key="stream:marketplace:down", table="silver.orders", runbook=runbook("stream-down"))
    return Alert(**{**values, **changes})


def outbox_records(settings: Settings) -> list[dict]:
    return [json.loads(line) for line in settings.alerts_outbox.read_text().splitlines()]


def test_dispatch_logs_first_and_keeps_the_alert_in_the_outbox_when_every_sink_fails(tmp_path, caplog):
    settings = Settings(home=tmp_path, alert_webhook_url=closed_port_url("/hook"),
                        alert_slack_webhook_url=closed_port_url("/slack"), alert_pagerduty_routing_key="key",
                        alert_pagerduty_url=closed_port_url("/pagerduty"), alert_retries=0)
    alert = stream_down()
    with caplog.at_level(logging.INFO, logger="spark_apps"):
        deliveries = dispatch(settings, alert)
    assert [(d.sink, d.ok) for d in deliveries] == [("webhook", False), ("slack", False), ("pagerduty", False)]
    first, *failures = caplog.records
    assert first.levelno == logging.CRITICAL
    assert first.getMessage() == ("ALERT critical [stream:marketplace:down] stream marketplace is down "
                                  "(table silver.orders; runbook docs/runbook.md#stream-down)")
    assert [(r.levelno, r.getMessage().split(" NOT delivered to ")[1].split()[0]) for r in failures] == [
        (logging.ERROR, "webhook"), (logging.ERROR, "slack"), (logging.ERROR, "pagerduty")]
    record, = outbox_records(settings)
    assert record["alert_id"] == alert.alert_id and record["dedup_key"] == "stream:marketplace:down"
    assert [(d["sink"], d["ok"], d["attempts"]) for d in record["deliveries"]] == [
        ("webhook", False, 1), ("slack", False, 1), ("pagerduty", False, 1)]
    assert all("Connection refused" in d["error"] for d in record["deliveries"])


def test_dispatch_with_no_sink_configured_records_and_logs_the_alert_without_an_error(tmp_path, caplog):
    settings = Settings(home=tmp_path)
    with caplog.at_level(logging.INFO, logger="spark_apps"):
        assert dispatch(settings, stream_down(severity="warning")) == []
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert settings.alerts_outbox == tmp_path / "alerts" / "outbox.jsonl"
    record, = outbox_records(settings)
    assert record["severity"] == "warning" and record["deliveries"] == []


def test_dispatch_does_not_raise_when_the_outbox_cannot_be_written(tmp_path, caplog):
    (tmp_path / "not-a-folder").write_text("")
    settings = Settings(home=tmp_path, alerts_outbox=tmp_path / "not-a-folder" / "outbox.jsonl")
    alert = stream_down()
    with caplog.at_level(logging.INFO, logger="spark_apps"):
        assert dispatch(settings, alert) == []
    assert [r.levelno for r in caplog.records] == [logging.CRITICAL, logging.ERROR]
    assert caplog.records[1].getMessage() == (f"alert {alert.alert_id} could not be written to the outbox "
                                              f"{settings.alerts_outbox}")


def test_outbox_lines_become_one_row_per_alert_and_a_torn_line_is_skipped(caplog):
    alert = stream_down(offsets={0: 10}, versions={"silver.orders": 4}, details={"pid": 123},
                        raised_at=dt.datetime(2026, 3, 1, 8, 0, tzinfo=dt.UTC))
    line = outbox_line(alert, [Delivery("slack", ok=False, status=500, error="HTTP 500", attempts=3)])
    with caplog.at_level(logging.ERROR, logger="spark_apps"):
        rows = outbox_rows([line, '{"alert_id": "torn', line, "\n"])
    assert rows == [{
        "alert_id": alert.alert_id, "raised_at": dt.datetime(2026, 3, 1, 8, 0, tzinfo=dt.UTC),
        "severity": "critical", "summary": "stream marketplace is down", "source": "supervisor",
        "dedup_key": "stream:marketplace:down", "table": "silver.orders", "offsets": {0: 10},
        "versions": {"silver.orders": 4}, "details": '{"pid": 123}', "runbook": "docs/runbook.md#stream-down",
        "deliveries": '[{"attempts": 3, "error": "HTTP 500", "ok": false, "sink": "slack", "status": 500}]',
        "action": "trigger"}]
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == ["skipping an unreadable alert outbox line"]


def test_an_alert_line_shows_time_severity_dedup_key_table_summary_and_each_sink_outcome():
    row = {"time": "2026-03-01 08:00:00Z", "severity": "critical", "dedup_key": "stream:marketplace:down",
           "table": "silver.orders", "summary": "stream marketplace\nis down",
           "deliveries": json.dumps([{"sink": "webhook", "ok": True}, {"sink": "slack", "ok": False,
                                                                       "error": "HTTP 500 Internal Server Error"}])}
    assert alert_line(row) == ("2026-03-01 08:00:00Z critical stream:marketplace:down silver.orders: stream "
                               "marketplace is down [webhook ok, slack failed (HTTP 500 Internal Server Error)]")
    assert alert_line({**row, "table": "", "deliveries": "[]"}).endswith(
        "stream:marketplace:down -: stream marketplace is down [no sink configured]")
    assert alert_line({**row, "deliveries": None}).endswith("[deliveries not recorded]")


def test_every_runbook_anchor_the_apps_link_to_is_a_section_of_the_runbook():
    sections = set(re.findall(r"^## (\S+)$", (PROJECT_ROOT / "docs" / "runbook.md").read_text(), re.MULTILINE))
    used = {anchor for path in Path(PROJECT_ROOT / "spark_apps").rglob("*.py")
            for anchor in re.findall(r'\brunbook\("([^"]+)"\)', path.read_text())}
    assert {"task-failed", "log-retention", "reconciliation-mismatch"} <= used
    assert used <= sections


def test_an_incident_is_open_from_its_trigger_until_its_resolve_goes_to_the_same_sinks(tmp_path):
    with WebhookReceiver() as receiver:
        settings = Settings(home=tmp_path, alert_webhook_url=f"{receiver.url}/hook")
        assert not resolve(settings, "stream:marketplace:down", "supervisor", "never raised")
        dispatch(settings, stream_down())
        assert open_incidents(settings)["stream:marketplace:down"]["summary"] == "stream marketplace is down"
        assert resolve(settings, "stream:marketplace:down", "supervisor", "the stream is ok")
        assert not resolve(settings, "stream:marketplace:down", "supervisor", "already resolved")
    assert [(b["dedup_key"], b["action"], b["severity"]) for b in receiver.bodies("/hook")] == [
        ("stream:marketplace:down", "trigger", "critical"), ("stream:marketplace:down", "resolve", "info")]
    assert receiver.bodies("/hook")[1]["summary"] == "resolved: stream:marketplace:down: the stream is ok"
    assert open_incidents(settings) == {}
    assert [r["action"] for r in outbox_records(settings)] == ["trigger", "resolve"]


def test_resolving_what_cleared_leaves_conditions_still_raised_and_other_prefixes_open(tmp_path):
    settings = Settings(home=tmp_path)
    for key in ("quality:p:gold.a", "quality:p:gold.b", "quality:q:gold.a", "reconcile:p:gold.a"):
        dispatch(settings, stream_down(dedup_key=key))
    assert resolve_cleared(settings, "quality:p:", ["quality:p:gold.b"], "audit", "rules hold") == ["quality:p:gold.a"]
    assert sorted(open_incidents(settings)) == ["quality:p:gold.b", "quality:q:gold.a", "reconcile:p:gold.a"]


def test_an_unreadable_incidents_file_is_logged_and_read_as_nothing_open(tmp_path, caplog):
    settings = Settings(home=tmp_path)
    settings.alerts_incidents.parent.mkdir(parents=True)
    settings.alerts_incidents.write_text('{"torn')
    with caplog.at_level(logging.ERROR, logger="spark_apps"):
        assert open_incidents(settings) == {}
    assert "cannot be read" in caplog.records[0].getMessage()
    dispatch(settings, stream_down())
    assert list(open_incidents(settings)) == ["stream:marketplace:down"], "the next alert writes it whole again"


def test_kappa_alerts_open_lists_the_open_incidents_oldest_first_without_spark(tmp_path, monkeypatch, capsys):
    from spark_apps.cli import main

    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    assert main(["alerts", "--open"]) == 0
    assert capsys.readouterr().out == "no open incidents\n"
    settings = Settings(home=tmp_path)
    dispatch(settings, stream_down(dedup_key="stream:marketplace:stalled", summary="stalled\n for 10 min",
                                   raised_at=dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.UTC)))
    dispatch(settings, stream_down(raised_at=dt.datetime(2026, 3, 1, 8, 0, tzinfo=dt.UTC)))
    assert main(["alerts", "--open"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "2026-03-01 08:00:00Z critical stream:marketplace:down silver.orders: stream marketplace is down "
        "(docs/runbook.md#stream-down)",
        "2026-03-01 09:00:00Z critical stream:marketplace:stalled silver.orders: stalled for 10 min "
        "(docs/runbook.md#stream-down)"]
