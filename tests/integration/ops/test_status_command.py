"""`kappa status` against the real broker, the ledger and the serving state the audited stream left."""

import json

import pytest

from spark_apps.audit.ledger import LEDGER_TABLE
from spark_apps.cli import main
from spark_apps.io.catalog import table_path
from spark_apps.serving import state as serving

pytestmark = pytest.mark.integration


def test_status_shows_the_stopped_stream_its_newest_audit_and_serving_and_exits_non_zero(
        spark, restarted_stream, audited, monkeypatch, capsys, tmp_path):
    settings = restarted_stream.job.settings
    for name, value in settings.as_env().items():
        monkeypatch.setenv(name, value)
    ledger = spark.read.format("delta").load(str(table_path(settings, LEDGER_TABLE))).collect()
    newest = max(ledger, key=lambda r: (r.finished_at, r.run_id)).run_id
    exact = all(r.success for r in ledger if r.run_id == newest)

    exit_code = main(["status", "--pipeline", "marketplace", "--json", str(tmp_path / "status.json")])

    out = capsys.readouterr().out.splitlines()
    assert exit_code == 1, "a stream that is not running needs on-call"
    assert out[1].split()[:3] == ["marketplace", "down", "-"] and f"({newest})" in out[1]
    assert ("exact" if exact else "FAILED") in out[1]
    assert out[2].startswith("marketplace: no stream process is running")
    status = json.loads((tmp_path / "status.json").read_text())["pipelines"]
    assert [(s["pipeline"], s["stream"], s["healthy"]) for s in status] == [("marketplace", "down", False)]
    assert status[0]["last_audit"]["run_id"] == newest and status[0]["last_audit"]["success"] == exact
    assert status[0]["serving"] == serving.current_modes(spark, settings, "marketplace")


def test_status_of_an_unknown_pipeline_is_one_line(capsys):
    assert main(["status", "--pipeline", "nope"]) == 1
    assert capsys.readouterr().err.strip().startswith("kappa status: error: no pipeline named 'nope'; registered:")
