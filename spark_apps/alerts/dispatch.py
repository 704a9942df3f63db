"""Alerts to on-call: one module for the Spark apps, the stream supervisor and Airflow callbacks.

Severity, summary, the table, offsets and versions it concerns, a dedup key (so a repeating condition is one
incident, not a page per run) and a runbook link travel with each alert. ``dispatch`` logs the alert first, so
nothing after it can hide it, notes its incident open (or closed, for a resolve: ``incidents``), then sends it to
every configured sink, then records it: a JSON line in the outbox, which a SparkSession drains into
``audit.alerts``. Processes that must not start a JVM (Airflow callbacks, the supervisor) leave their alerts in the
outbox for the next Spark command to record. ``resolve`` closes an incident only if it is open.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import uuid
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from spark_apps.alerts import incidents
from spark_apps.alerts.alert import Alert, resolution
from spark_apps.alerts.sinks import Delivery, deliver
from spark_apps.core.settings import Settings
from spark_apps.io import delta_log
from spark_apps.io.catalog_locks import table_write
from spark_apps.io.fencing import file_lock

log = logging.getLogger(__name__)
ALERTS_TABLE = "audit.alerts"
_LOG_LEVELS = {"critical": logging.CRITICAL, "error": logging.ERROR}


def raise_alert(spark, settings: Settings, alert: Alert) -> list[Delivery]:
    """Alert from a Spark app: logged, sent, and recorded in ``audit.alerts`` with what came before it."""
    return dispatch(settings, alert, spark)


def dispatch(settings: Settings, alert: Alert, spark=None) -> list[Delivery]:
    """Log, send, record, in that order; never raises, so an alert cannot fail the pipeline that raises it.

    Without ``spark`` the alert waits in the outbox; with it, the outbox (this alert and any earlier ones) is
    drained into ``audit.alerts``. A failed drain is logged and leaves the alerts in the outbox for the next.
    """
    log.log(_LOG_LEVELS.get(alert.severity, logging.WARNING), "ALERT %s [%s] %s (table %s; runbook %s)",
            alert.severity, alert.dedup_key, alert.summary, alert.table or "-", alert.runbook)
    _note(settings, alert)
    deliveries = deliver(settings, alert)
    line = outbox_line(alert, deliveries)
    kept = _keep(settings.alerts_outbox, line, alert.alert_id)
    if spark is not None:
        try:
            _record(spark, settings, extra=() if kept else (line,))
        except Exception:
            where = f"kept in the outbox folder {settings.alerts_outbox.parent}" if kept else "only in this log"
            log.exception("alert %s not recorded in %s, %s", alert.alert_id, ALERTS_TABLE, where)
    return deliveries


def resolve(settings: Settings, dedup_key: str, source: str, summary: str, spark=None) -> bool:
    """Close the incident of ``dedup_key`` if one is open; a condition that never fired sends nothing."""
    if dedup_key not in incidents.read_open(settings.alerts_incidents):
        return False
    dispatch(settings, resolution(dedup_key, source, f"{dedup_key}: {summary}"), spark)
    return True


def resolve_cleared(settings: Settings, prefix: str, still: Iterable[str], source: str, summary: str,
                    spark=None) -> list[str]:
    """Close every open incident under ``prefix`` that is not in ``still`` (the conditions raised again)."""
    keys = incidents.cleared(incidents.read_open(settings.alerts_incidents), prefix, still)
    for key in keys:
        dispatch(settings, resolution(key, source, f"{key}: {summary}"), spark)
    return keys


def open_incidents(settings: Settings) -> dict[str, dict[str, Any]]:
    """The incidents open now, by dedup key, with the alert that opened each."""
    return incidents.read_open(settings.alerts_incidents)


def record_pending(spark, settings: Settings) -> int:
    """Move the outbox into ``audit.alerts``; return how many alerts were new to the table.

    The merge is by alert id, so a crash after it but before the drained files are deleted repeats a merge
    that inserts nothing: each alert is recorded exactly once.
    """
    return _record(spark, settings, extra=())


def recent_alerts(spark, settings: Settings, limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` alerts, newest first, after recording the outbox; none when nothing was recorded."""
    from pyspark.sql import functions as F

    from spark_apps.io.catalog import table_path

    record_pending(spark, settings)
    if not delta_log.has_commits(table_path(settings, ALERTS_TABLE)):
        return []
    path = _ensure_alerts_table(spark, settings)
    rows = (spark.read.format("delta").load(str(path)).orderBy(F.col("raised_at").desc()).limit(limit)
            .select(F.date_format("raised_at", "yyyy-MM-dd HH:mm:ss'Z'").alias("time"), "severity", "dedup_key",
                    "table", "summary", "deliveries").collect())
    return [row.asDict() for row in rows]


def alert_line(row: dict[str, Any]) -> str:
    """One recorded alert on one line: time, severity, dedup key, table, summary, what each sink made of it."""
    summary = " ".join(row["summary"].split())
    return (f"{row['time']} {row['severity']:8s} {row['dedup_key']} {row['table'] or '-'}: {summary} "
            f"[{deliveries_text(row['deliveries'])}]")


def incident_line(dedup_key: str, opened: dict[str, Any]) -> str:
    """One open incident on one line: since when, severity, dedup key, table, the summary that opened it, runbook."""
    since = str(opened.get("raised_at", ""))[:19].replace("T", " ")
    summary = " ".join(str(opened.get("summary", "")).split())
    return (f"{since}Z {opened.get('severity', '?'):8s} {dedup_key} {opened.get('table') or '-'}: {summary} "
            f"({opened.get('runbook', '')})")


def deliveries_text(deliveries: str | None) -> str:
    """The recorded delivery outcomes, short: ``webhook ok, slack failed (HTTP 500 ...)``."""
    if deliveries is None:
        return "deliveries not recorded"
    outcomes = json.loads(deliveries)
    if not outcomes:
        return "no sink configured"
    return ", ".join(f"{d['sink']} ok" if d["ok"] else f"{d['sink']} failed ({d['error']})" for d in outcomes)


# ---- outbox -----------------------------------------------------------------------------------------

def outbox_line(alert: Alert, deliveries: Sequence[Delivery]) -> str:
    """The alert and its delivery outcomes as one JSON line."""
    record = {**alert.as_json(), "deliveries": [asdict(d) for d in deliveries]}
    return json.dumps(record, sort_keys=True, default=str) + "\n"


def outbox_rows(lines: Iterable[str]) -> list[dict[str, Any]]:
    """``audit.alerts`` rows of outbox lines, one per alert id; a torn or foreign line is logged and skipped."""
    rows: dict[str, dict[str, Any]] = {}
    for line in lines:
        if not line.strip():
            continue
        try:
            row = table_row(json.loads(line))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.error("skipping an unreadable alert outbox line (%s): %r", exc, line[:500])
            continue
        rows.setdefault(row["alert_id"], row)
    return list(rows.values())


def table_row(record: dict[str, Any]) -> dict[str, Any]:
    """An outbox record as an ``audit.alerts`` row."""
    return {"alert_id": str(record["alert_id"]), "raised_at": dt.datetime.fromisoformat(record["raised_at"]),
            "severity": record["severity"], "summary": record["summary"], "source": record["source"],
            "dedup_key": record["dedup_key"], "table": record["table"],
            "offsets": {int(p): int(o) for p, o in record["offsets"].items()},
            "versions": {str(t): int(v) for t, v in record["versions"].items()},
            "details": json.dumps(record["details"], sort_keys=True, default=str), "runbook": record["runbook"],
            "deliveries": json.dumps(record["deliveries"], sort_keys=True),
            "action": record.get("action", "trigger")}


def append_outbox(outbox: Path, line: str) -> None:
    """Append one line, on disk before returning: an Airflow callback's process may end right after."""
    outbox.parent.mkdir(parents=True, exist_ok=True)
    with _outbox_lock(outbox), outbox.open("a", encoding="utf-8") as out:
        out.write(line)
        out.flush()
        os.fsync(out.fileno())


def _note(settings: Settings, alert: Alert) -> None:
    try:
        incidents.note(settings.alerts_incidents, alert)
    except OSError:
        log.exception("alert %s could not be noted in the open incidents %s", alert.alert_id,
                      settings.alerts_incidents)


def _keep(outbox: Path, line: str, alert_id: str) -> bool:
    try:
        append_outbox(outbox, line)
        return True
    except OSError:
        log.exception("alert %s could not be written to the outbox %s", alert_id, outbox)
        return False


def _outbox_lock(outbox: Path) -> AbstractContextManager[bool]:
    """Appends and the drain's rename exclude each other, so no line lands in a file already being drained."""
    return file_lock(outbox.with_name(outbox.name + ".lock"))


def _take_outbox(outbox: Path) -> list[Path]:
    """Rename the outbox aside; return every renamed-aside file, including those a crashed drain left."""
    if outbox.exists():
        with _outbox_lock(outbox):
            if outbox.exists():
                os.replace(outbox, outbox.with_name(f"{outbox.name}.{uuid.uuid4().hex}.draining"))
    return sorted(outbox.parent.glob(f"{outbox.name}.*.draining"))


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:  # a concurrent drain recorded and deleted it
        return []


# ---- audit.alerts -------------------------------------------------------------------------------------

ALERTS_SCHEMA = ("raised_at timestamp, severity string, summary string, source string, dedup_key string, "
                 "table string, offsets map<int,bigint>, details string, runbook string, "
                 "alert_id string, versions map<string,bigint>, deliveries string, action string")


def _record(spark, settings: Settings, extra: Sequence[str]) -> int:
    files = _take_outbox(settings.alerts_outbox)
    rows = outbox_rows([*extra, *(line for path in files for line in _read_lines(path))])
    inserted = _merge(spark, settings, rows) if rows else 0
    for path in files:
        path.unlink(missing_ok=True)
    if rows:
        log.info("recorded %d new alert(s) of %d in %s", inserted, len(rows), ALERTS_TABLE)
    return inserted


def _merge(spark, settings: Settings, rows: list[dict[str, Any]]) -> int:
    from delta.tables import DeltaTable

    path = _ensure_alerts_table(spark, settings)
    frame = spark.createDataFrame(rows, ALERTS_SCHEMA)
    with table_write(spark, settings, path, "alerts"):
        metrics = (DeltaTable.forPath(spark, str(path)).alias("t").merge(frame.alias("s"), "t.alert_id = s.alert_id")
                   .whenNotMatchedInsertAll().execute().first())
    return int(metrics["num_inserted_rows"])


def _ensure_alerts_table(spark, settings: Settings) -> Path:
    """Create ``audit.alerts``, or add the columns a table written before alert ids, deliveries and actions lacks.

    Without them the merge would silently drop the alert id and insert every outbox alert again.
    """
    from spark_apps.io.catalog import ensure_table, table_path

    schema = spark.createDataFrame([], ALERTS_SCHEMA).schema
    path = table_path(settings, ALERTS_TABLE)
    if not delta_log.has_commits(path):
        ensure_table(spark, settings, ALERTS_TABLE, schema)
        return path
    present = set(spark.read.format("delta").load(str(path)).columns)
    missing = [f"`{f.name}` {f.dataType.simpleString()}" for f in schema.fields if f.name not in present]
    if missing:
        with table_write(spark, settings, path, "new alert columns"):
            spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({', '.join(missing)})")
    return path
