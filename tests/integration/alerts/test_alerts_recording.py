"""Alerts in audit.alerts: raised from a Spark app, drained from the outbox exactly once, listed by `kappa alerts`."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from spark_apps.alerts.alert import Alert, runbook
from spark_apps.alerts.dispatch import (
    ALERTS_TABLE,
    alert_line,
    dispatch,
    outbox_line,
    raise_alert,
    recent_alerts,
    record_pending,
)
from spark_apps.cli import main
from spark_apps.core.settings import Settings
from spark_apps.io.catalog import ensure_table, table_path
from spark_apps.services.processes import free_port

pytestmark = pytest.mark.integration

OLD_ALERTS_SCHEMA = ("raised_at timestamp, severity string, summary string, source string, dedup_key string, "
                     "table string, offsets map<int,bigint>, details string, runbook string")


@pytest.fixture
def local(isolated_home: Settings, tmp_path) -> Settings:
    """A throwaway warehouse and outbox for one test."""
    return isolated_home.with_overrides(alerts_outbox=tmp_path / "alerts" / "outbox.jsonl")


def lag_alert(n: int, **changes) -> Alert:
    values = dict(severity="warning", summary=f"stream marketplace lags by {n} records", source="supervisor",
                  dedup_key="stream:marketplace:lagging", table="silver.orders", offsets={0: n},
                  runbook=runbook("stream-lagging"))
    return Alert(**{**values, **changes})


def recorded(spark, settings: Settings) -> list:
    return spark.read.format("delta").load(str(table_path(settings, ALERTS_TABLE))).collect()


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}/hook"


def test_an_alert_raised_with_spark_is_recorded_with_its_versions_and_each_sink_outcome(spark, local):
    settings = local.with_overrides(alert_webhook_url=closed_port_url(), alert_retries=0)
    alert = lag_alert(60_000, severity="critical", versions={"silver.orders": 12})
    deliveries = raise_alert(spark, settings, alert)
    row, = recorded(spark, settings)
    assert (row.alert_id, row.severity, row.dedup_key, row.table) == (
        alert.alert_id, "critical", "stream:marketplace:lagging", "silver.orders")
    assert row.offsets == {0: 60_000} and row.versions == {"silver.orders": 12}
    assert row.runbook == "docs/runbook.md#stream-lagging"
    assert json.loads(row.deliveries) == [
        {"sink": "webhook", "ok": False, "status": None, "error": deliveries[0].error, "attempts": 1}]
    assert "Connection refused" in deliveries[0].error
    drained = sorted(p.name for p in settings.alerts_outbox.parent.iterdir() if p.name.startswith("outbox"))
    assert drained == ["outbox.jsonl.lock"], "the outbox was drained into the table"


def test_outbox_alerts_are_recorded_exactly_once_however_often_the_outbox_is_drained(spark, local):
    first, second, third = lag_alert(1), lag_alert(2), lag_alert(3)
    dispatch(local, first)
    dispatch(local, second)
    assert record_pending(spark, local) == 2
    assert record_pending(spark, local) == 0
    # A drain that crashed after its merge but before deleting what it drained leaves recorded alerts behind.
    crashed = local.alerts_outbox.with_name("outbox.jsonl.crashed.draining")
    crashed.write_text(outbox_line(first, []) + outbox_line(second, []))
    dispatch(local, third)
    assert record_pending(spark, local) == 1
    assert sorted(r.alert_id for r in recorded(spark, local)) == sorted(a.alert_id for a in (first, second, third))
    assert not crashed.exists() and not local.alerts_outbox.exists()


def test_an_alerts_table_from_before_alert_ids_gains_the_new_columns_and_keeps_its_rows(spark, local):
    old = spark.createDataFrame([{"raised_at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "severity": "critical",
                                  "summary": "old", "source": "batch", "dedup_key": "retention:t", "table": "",
                                  "offsets": {0: 1}, "details": "{}", "runbook": "README.md#runbook"}],
                                OLD_ALERTS_SCHEMA)
    ensure_table(spark, local, ALERTS_TABLE, old.schema)
    old.write.format("delta").mode("append").save(str(table_path(local, ALERTS_TABLE)))
    assert [alert_line(row) for row in recent_alerts(spark, local, 5)] == [
        "2026-01-01 00:00:00Z critical retention:t -: old [deliveries not recorded]"]
    alert = lag_alert(5)
    raise_alert(spark, local, alert)
    dispatch(local, alert)  # the same alert again: recorded once
    assert record_pending(spark, local) == 0
    rows = {r.summary: r for r in recorded(spark, local)}
    assert set(rows) == {"old", alert.summary}
    assert rows["old"].alert_id is None and rows[alert.summary].alert_id == alert.alert_id
    assert json.loads(rows[alert.summary].deliveries) == []
    assert rows["old"].action is None and rows[alert.summary].action == "trigger"


def test_kappa_alerts_records_the_outbox_then_lists_alerts_newest_first(spark, settings, tmp_path, monkeypatch,
                                                                        capsys):
    for name, value in settings.with_overrides(home=tmp_path).as_env().items():
        monkeypatch.setenv(name, value)
    home = Settings.from_env()
    assert home.warehouse_dir == tmp_path / "warehouse"
    assert main(["alerts"]) == 0
    assert capsys.readouterr().out == "no alerts recorded\n"

    dispatch(home, lag_alert(7, raised_at=dt.datetime(2026, 3, 1, 8, tzinfo=dt.UTC)))
    dispatch(home, lag_alert(9, severity="critical", table="", raised_at=dt.datetime(2026, 3, 1, 9, tzinfo=dt.UTC)))
    assert main(["alerts"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "2026-03-01 09:00:00Z critical stream:marketplace:lagging -: stream marketplace lags by 9 records "
        "[no sink configured]",
        "2026-03-01 08:00:00Z warning  stream:marketplace:lagging silver.orders: stream marketplace lags by 7 "
        "records [no sink configured]"]
    assert main(["alerts", "--limit", "1"]) == 0
    assert capsys.readouterr().out.startswith("2026-03-01 09:00:00Z critical")
