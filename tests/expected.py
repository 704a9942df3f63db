"""Ground truth computed in plain Python from the generator's manifest, never with platform code."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

UTC = dt.UTC


def event_time(payload: dict) -> dt.datetime:
    return dt.datetime.strptime(payload["event_time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def merchant_revenue(valid_events: dict[str, dict], window_s: int) -> dict[tuple, dict]:
    """(merchant_id, window_start, currency) -> the aggregates gold.merchant_revenue must hold."""
    groups: dict[tuple, dict] = defaultdict(lambda: {"orders": 0, "gross_cents": 0, "refunds_cents": 0,
                                                      "customers": set()})
    for payload in valid_events.values():
        seconds = int(event_time(payload).timestamp())
        start = dt.datetime.fromtimestamp(seconds - seconds % window_s, tz=UTC)
        row = groups[(payload["merchant_id"], start, payload["currency"])]
        row["customers"].add(payload["customer_id"])
        if payload["event_type"] == "order_placed":
            row["orders"] += 1
        elif payload["event_type"] == "payment_captured":
            row["gross_cents"] += payload["amount_cents"]
        elif payload["event_type"] == "order_refunded":
            row["refunds_cents"] += payload["amount_cents"]
    return {key: {"orders": row["orders"], "gross_cents": row["gross_cents"],
                  "refunds_cents": row["refunds_cents"], "net_cents": row["gross_cents"] - row["refunds_cents"],
                  "distinct_customers": len(row["customers"])}
            for key, row in groups.items()}


def as_utc(value: dt.datetime) -> dt.datetime:
    """Spark returns naive datetimes in the local zone of the Python process; make them aware UTC."""
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=None).astimezone(UTC)
