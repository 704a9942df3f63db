"""Where alerts go besides ``audit.alerts``: a generic JSON webhook, Slack and PagerDuty (Events API v2).

The payload builders are pure. ``deliver`` posts them with the standard library, retries a bounded number
of times and never raises: a sink that is down must neither hide the alert from the other sinks nor fail
the pipeline, so each failure is logged and returned as a ``Delivery`` that is recorded with the alert.
"""

from __future__ import annotations

import http.client
import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from spark_apps.alerts.alert import Alert
from spark_apps.core.secret import MASK
from spark_apps.core.settings import Settings

log = logging.getLogger(__name__)
BACKOFF_S = 0.5  # wait before retry n: BACKOFF_S * n
PAGERDUTY_SUMMARY_MAX = 1024
PAGERDUTY_DEDUP_KEY_MAX = 255
SLACK_TEXT_MAX = 3000
SLACK_FIELD_MAX = 2000
SLACK_HEADER_MAX = 150
ANSWER_MAX = 300  # bytes of a refusing sink's answer kept in the error


@dataclass(frozen=True)
class Delivery:
    """What one sink made of one alert: recorded with the alert, so on-call sees which sinks were reached."""

    sink: str
    ok: bool
    status: int | None = None
    error: str = ""
    attempts: int = 1


def webhook_payload(alert: Alert) -> dict[str, Any]:
    """The whole alert, as recorded: ISO timestamp, string map keys."""
    return alert.as_json()


def slack_payload(alert: Alert) -> dict[str, Any]:
    """A Slack incoming-webhook message: ``text`` for notifications and clients without blocks, ``blocks`` to read."""
    label = "RESOLVED" if alert.resolves else alert.severity.upper()
    title = f"{label}: {alert.source or 'kappa-audit'}"
    fields = [("Severity", alert.severity), ("Table", alert.table or "-"), ("Dedup key", alert.dedup_key),
              ("Offsets", _pairs(alert.offsets, "p")), ("Versions", _pairs(alert.versions)),
              ("Runbook", alert.runbook)]
    return {
        "text": _cut(f"[{label}] {_escape(alert.summary)} (dedup key {_escape(alert.dedup_key)}; "
                     f"runbook {_escape(alert.runbook)})", SLACK_TEXT_MAX),
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": _cut(title, SLACK_HEADER_MAX)}},
            {"type": "section", "text": {"type": "mrkdwn", "text": _cut(_escape(alert.summary), SLACK_TEXT_MAX)}},
            {"type": "section", "fields": [
                {"type": "mrkdwn", "text": _cut(f"*{name}*\n{_escape(value)}", SLACK_FIELD_MAX)}
                for name, value in fields]},
            {"type": "context", "elements": [
                {"type": "mrkdwn", "text": f"alert {alert.alert_id} raised {alert.raised_at.isoformat()}"}]},
        ],
    }


def pagerduty_payload(alert: Alert, routing_key: str) -> dict[str, Any]:
    """A PagerDuty Events API v2 trigger; the dedup key folds a repeating condition into one incident, and a
    resolving alert closes that incident."""
    if alert.resolves:
        return {"routing_key": routing_key, "event_action": "resolve",
                "dedup_key": alert.dedup_key[:PAGERDUTY_DEDUP_KEY_MAX]}
    payload: dict[str, Any] = {
        "summary": _cut(alert.summary, PAGERDUTY_SUMMARY_MAX),
        "source": alert.source or "kappa-audit",
        "severity": alert.severity,  # Alert only admits PagerDuty's four severities
        "timestamp": alert.raised_at.isoformat(),
        "custom_details": {"alert_id": alert.alert_id, "offsets": alert.as_json()["offsets"],
                           "versions": dict(alert.versions), "details": alert.details},
    }
    if alert.table:
        payload["component"] = alert.table
    return {"routing_key": routing_key, "event_action": "trigger",
            "dedup_key": alert.dedup_key[:PAGERDUTY_DEDUP_KEY_MAX], "payload": payload,
            "links": [{"href": alert.runbook, "text": "runbook"}]}


def sink_requests(settings: Settings, alert: Alert) -> list[tuple[str, str, dict[str, Any]]]:
    """Sink name, URL and payload of every configured sink; an empty setting means not configured."""
    requests = []
    if settings.alert_webhook_url:
        requests.append(("webhook", settings.alert_webhook_url.reveal(), webhook_payload(alert)))
    if settings.alert_slack_webhook_url:
        requests.append(("slack", settings.alert_slack_webhook_url.reveal(), slack_payload(alert)))
    if settings.alert_pagerduty_routing_key:
        requests.append(("pagerduty", settings.alert_pagerduty_url,
                         pagerduty_payload(alert, settings.alert_pagerduty_routing_key.reveal())))
    return requests


def deliver(settings: Settings, alert: Alert) -> list[Delivery]:
    """Send the alert to every configured sink, each on its own: one failing sink does not stop the others."""
    deliveries = []
    for sink, url, payload in sink_requests(settings, alert):
        delivery = post_json(sink, url, payload, settings.alert_timeout_s, settings.alert_retries)
        if delivery.ok:
            log.info("alert %s delivered to %s", alert.alert_id, sink)
        else:
            log.error("alert %s [%s] NOT delivered to %s after %d attempt(s): %s", alert.alert_id, alert.dedup_key,
                      sink, delivery.attempts, delivery.error)
        deliveries.append(delivery)
    return deliveries


def post_json(sink: str, url: str, payload: dict[str, Any], timeout_s: float, retries: int) -> Delivery:
    """POST ``payload``; retry connection errors, 5xx and 429 up to ``retries`` times, other answers are final."""
    try:
        scheme = urllib.parse.urlsplit(url).scheme
    except ValueError:  # a bracketed host that does not close, say: the message would quote the URL
        return Delivery(sink, ok=False, error=f"the {sink} URL is malformed; check its KAPPA_ALERT_* setting",
                        attempts=0)
    if scheme not in ("http", "https"):
        # The URL itself may hold a token (webhooks carry it in the path), so the error never quotes it.
        return Delivery(sink, ok=False, error=f"the {sink} URL is not http(s) (scheme {scheme or 'missing'!r}); "
                                              "check its KAPPA_ALERT_* setting", attempts=0)
    request = urllib.request.Request(url, data=json.dumps(payload, default=str).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    attempt = 0
    while True:
        attempt += 1
        status, error, retryable = _attempt(request, timeout_s)
        error = _redacted(error, url)
        if not error:
            return Delivery(sink, ok=True, status=status, attempts=attempt)
        if not retryable or attempt > retries:
            return Delivery(sink, ok=False, status=status, error=error, attempts=attempt)
        time.sleep(BACKOFF_S * attempt)


def _redacted(error: str, url: str) -> str:
    """The error without the URL's path and query, where webhooks keep their token (Python's own URL errors quote
    them); the host stays, it says which endpoint failed."""
    parts = urllib.parse.urlsplit(url)
    for secret in sorted({url, parts.path, parts.query, parts.path.lstrip("/")} - {"", "/"}, key=len, reverse=True):
        error = error.replace(secret, MASK)
    return error


def _attempt(request: urllib.request.Request, timeout_s: float) -> tuple[int | None, str, bool]:
    """One POST: the HTTP status, the error ("" when accepted) and whether trying again can help."""
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status, "", False
    except urllib.error.HTTPError as exc:
        answer = _answer(exc)
        error = f"HTTP {exc.code} {exc.reason}" + (f": {answer}" if answer else "")
        return exc.code, error, exc.code == 429 or exc.code >= 500
    except urllib.error.URLError as exc:
        return None, str(exc.reason), True
    except (http.client.InvalidURL, ValueError) as exc:  # trying a malformed URL again cannot help
        # Not quoted: the message holds the URL's path as repr() escapes it, which no redaction can match for sure.
        return None, (f"{type(exc).__name__}: the URL is malformed (a space, a control character or a bad host); "
                      "check its KAPPA_ALERT_* setting"), False
    except (OSError, http.client.HTTPException) as exc:
        return None, f"{type(exc).__name__}: {exc}", True


def _answer(exc: urllib.error.HTTPError) -> str:
    """The start of a refusing sink's body, on one line: PagerDuty and Slack say there what was wrong."""
    try:
        with exc:
            return " ".join(exc.read(ANSWER_MAX).decode("utf-8", "replace").split())
    except (OSError, http.client.HTTPException):
        return ""


def _pairs(mapping: dict, prefix: str = "") -> str:
    return ", ".join(f"{prefix}{key}={value}" for key, value in sorted(mapping.items())) or "-"


def _escape(text: str) -> str:
    """Slack mrkdwn control characters, so a summary cannot turn into a mention or a broken link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
