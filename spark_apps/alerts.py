"""Alerts to on-call: every alert is appended to ``audit.alerts`` and logged.

Severity, summary, the table and offsets it concerns, a dedup key (so a repeating condition is one
incident, not a page per run) and a runbook link travel with each alert.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import asdict, dataclass, field

from spark_apps.settings import Settings

log = logging.getLogger(__name__)
ALERTS_TABLE = "audit.alerts"
RUNBOOK = "README.md#runbook"


@dataclass(frozen=True)
class Alert:
    severity: str  # "critical" pages on-call; "warning" does not
    summary: str
    source: str
    dedup_key: str
    table: str = ""
    offsets: dict[int, int] = field(default_factory=dict)
    details: dict = field(default_factory=dict)
    runbook: str = RUNBOOK


def raise_alert(spark, settings: Settings, alert: Alert) -> None:
    """Record the alert where on-call and dashboards read it."""
    from spark_apps.catalog import ensure_table, table_path

    row = {**asdict(alert), "raised_at": dt.datetime.now(dt.UTC),
           "offsets": {int(p): int(o) for p, o in alert.offsets.items()},
           "details": json.dumps(alert.details, sort_keys=True, default=str)}
    frame = spark.createDataFrame([row], _ALERTS_SCHEMA)
    ensure_table(spark, settings, ALERTS_TABLE, frame.schema)
    frame.write.format("delta").mode("append").save(str(table_path(settings, ALERTS_TABLE)))
    log.log(logging.CRITICAL if alert.severity == "critical" else logging.WARNING, "ALERT %s [%s] %s",
            alert.severity, alert.dedup_key, alert.summary)


_ALERTS_SCHEMA = ("raised_at timestamp, severity string, summary string, source string, dedup_key string, "
                  "table string, offsets map<int,bigint>, details string, runbook string")
