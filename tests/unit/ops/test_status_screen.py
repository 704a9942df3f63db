"""The `kappa status` screen, rendered from statuses built by hand (no Spark, no broker)."""

import datetime as dt

from spark_apps.ops.status import (
    EXIT_HEALTHY,
    EXIT_INCIDENT,
    EXIT_UNKNOWN,
    LastAudit,
    PipelineStatus,
    as_json,
    exit_code,
    render,
)
from spark_apps.ops.supervisor import Health

NOW = dt.datetime(2026, 11, 24, 12, 0, 0)


def status(name: str, stream: str, lag: int | None, audit: LastAudit | None, serving: dict) -> PipelineStatus:
    return PipelineStatus(name, Health(stream, lag, {}, 3.0, f"{name} detail"), audit, serving)


def test_a_pipeline_needing_on_call_heads_the_screen_with_its_reason():
    fine = status("marketplace", "ok", 0, LastAudit("kappa_reconcile.1", NOW - dt.timedelta(minutes=5), True, ()),
                  {"gold.a": "kappa", "gold.b": "kappa"})
    broken = status("sensors", "down", None,
                    LastAudit("kappa_reconcile.2", NOW - dt.timedelta(hours=3), False, ("gold.c",)),
                    {"gold.c": "lambda"})
    lines = render([fine, broken], NOW).splitlines()
    assert lines[0].split() == ["PIPELINE", "STREAM", "LAG", "LAST", "AUDIT", "VERDICT", "SERVING"]
    assert lines[1].split()[:3] == ["sensors", "down", "-"] and "FAILED: gold.c" in lines[1]
    assert "3h ago (kappa_reconcile.2)" in lines[1] and lines[1].endswith("1 of 1 from the batch")
    assert lines[2].split()[:3] == ["marketplace", "ok", "0"] and "5m ago" in lines[2] and " exact " in lines[2]
    assert lines[2].endswith("2 of 2 from the stream")
    assert lines[3] == "sensors: sensors detail", "the unhealthy stream's detail follows the table"
    assert len({line.index("STREAM") for line in lines[:1]} | {lines[1].index("down")}) == 1, "columns align"


def test_a_pipeline_never_audited_is_healthy_while_its_stream_is_up_and_serves_the_batch():
    new = status("trips", "ok", 12, None, {})
    assert new.healthy
    line = render([new], NOW).splitlines()[1]
    assert "never" in line and line.endswith("batch (not yet reconciled)")
    assert as_json(new)["last_audit"] is None and as_json(new)["lag_records"] == 12


def test_a_failed_last_audit_makes_an_up_stream_unhealthy():
    failed = status("m", "ok", 0, LastAudit("r", NOW, False, ()), {"gold.a": "lambda"})
    assert not failed.healthy
    assert "FAILED: contract" in render([failed], NOW)


def test_a_pipeline_never_deployed_shows_not_started_and_leaves_the_exit_code_healthy():
    fresh = status("marketplace", "idle", None, None, {})
    assert render([fresh], NOW).splitlines()[1].split()[:3] == ["marketplace", "not", "started"]
    assert exit_code([fresh]) == EXIT_HEALTHY


def test_the_exit_code_says_healthy_an_incident_or_cannot_tell():
    fine = status("a", "ok", 0, None, {})
    blind = status("b", "blind", None, None, {})
    down = status("c", "down", None, None, {})
    failed_blind = status("d", "blind", None, LastAudit("r", NOW, False, ()), {})
    assert exit_code([fine]) == EXIT_HEALTHY
    assert exit_code([fine, blind]) == EXIT_UNKNOWN, "the log cannot be read: nothing known to be wrong"
    assert exit_code([blind, down]) == EXIT_INCIDENT
    assert exit_code([failed_blind]) == EXIT_INCIDENT, "a failed audit is an incident whatever the stream"
