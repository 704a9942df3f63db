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


def _earliest(events: list[dict]) -> dict | None:
    return min(events, key=lambda e: (event_time(e), e["event_id"]), default=None)


def order_status(valid_events: dict[str, dict]) -> dict[str, dict]:
    """order_id -> the row gold.order_status must hold: the order (earliest by event time, then id), the
    sums of its payments and refunds with the earliest of each, and the status rule of the README."""
    by_order: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for payload in valid_events.values():
        by_order[payload["order_id"]][payload["event_type"]].append(payload)
    rows = {}
    for order_id, sides in by_order.items():
        orders, payments, refunds = sides["order_placed"], sides["payment_captured"], sides["order_refunded"]
        order, payment, refund = _earliest(orders), _earliest(payments), _earliest(refunds)
        known = order or payment or refund
        if order is None:
            status = "orphan_payment" if payment else "orphan_refund"
        else:
            status = "refunded" if refund else "paid" if payment else "placed"
        rows[order_id] = {
            "customer_id": known["customer_id"], "merchant_id": known["merchant_id"], "currency": known["currency"],
            "order_amount_cents": order["amount_cents"] if order else None,
            "placed_at": event_time(order) if order else None,
            "paid_cents": sum(e["amount_cents"] for e in payments),
            "paid_at": event_time(payment) if payment else None,
            "refunded_cents": sum(e["amount_cents"] for e in refunds),
            "refunded_at": event_time(refund) if refund else None,
            "status": status,
        }
    return rows


def customer_sessions(valid_events: dict[str, dict], gap_s: int) -> dict[tuple, dict]:
    """(customer_id, session_start) -> the row gold.customer_sessions must hold: a customer's events in
    (event time, event id) order, cut wherever two consecutive ones are more than ``gap_s`` apart."""
    by_customer: dict[str, list[tuple[dt.datetime, str, str]]] = defaultdict(list)
    for event_id, payload in valid_events.items():
        by_customer[payload["customer_id"]].append((event_time(payload), event_id, payload["event_type"]))
    gap = dt.timedelta(seconds=gap_s)
    sessions: dict[tuple, dict] = {}
    for customer_id, events in by_customer.items():
        runs: list[list[tuple]] = []
        for event in sorted(events):
            if runs and event[0] - runs[-1][-1][0] <= gap:
                runs[-1].append(event)
            else:
                runs.append([event])
        for run in runs:
            start, end = run[0][0], run[-1][0]
            types = [event_type for _, _, event_type in run]
            sessions[(customer_id, start)] = {
                "session_end": end, "duration_ms": (end - start) // dt.timedelta(milliseconds=1), "events": len(run),
                "orders": types.count("order_placed"), "payments": types.count("payment_captured"),
                "refunds": types.count("order_refunded")}
    return sessions


def as_utc(value: dt.datetime) -> dt.datetime:
    """Spark returns naive datetimes in the local zone of the Python process; make them aware UTC."""
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=None).astimezone(UTC)
