"""The incidents open now, by dedup key: one small file every alerting process shares (Spark apps, the supervisor,
Airflow's callbacks), so a condition that clears can close its incident without a JVM, and a condition that was never
raised sends nothing.

``audit.alerts`` keeps the history; this file is only what is open, and it is rebuilt by the next alert of a key if it
is lost.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from spark_apps.alerts.alert import Alert
from spark_apps.core.paths import write_json_whole
from spark_apps.io.fencing import file_lock

log = logging.getLogger(__name__)


def read_open(path: Path) -> dict[str, dict[str, Any]]:
    """Per open dedup key, the alert that opened it (severity, summary, source, table, runbook, raised_at)."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.error("the open incidents in %s cannot be read (%s); treating none as open", path, exc)
        return {}
    return found if isinstance(found, dict) else {}


def note(path: Path, alert: Alert) -> None:
    """Open the alert's incident, or close it when the alert resolves; the newest trigger of a key is kept."""
    with file_lock(path.with_name(path.name + ".lock")):
        incidents = read_open(path)
        if alert.resolves:
            if incidents.pop(alert.dedup_key, None) is None:
                return
        else:
            incidents[alert.dedup_key] = {
                "severity": alert.severity, "summary": alert.summary, "source": alert.source, "table": alert.table,
                "runbook": alert.runbook, "raised_at": alert.raised_at.isoformat()}
        write_json_whole(path, incidents)


def cleared(open_keys: Iterable[str], prefix: str, still: Iterable[str]) -> list[str]:
    """The open incidents under ``prefix`` whose condition was not raised again: those have cleared."""
    current = set(still)
    return sorted(key for key in open_keys if key.startswith(prefix) and key not in current)
