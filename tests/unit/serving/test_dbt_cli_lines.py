"""What `kappa dbt` prints when steps fail or are refused: a refusal says why in its own line, and the summary
line counts only what dbt ran and failed."""

from __future__ import annotations

import pytest

from spark_apps.cli import main

REFUSED = {"command": "build --select source:serving+", "success": False,
           "refused": "serving.merchant_revenue: no reconciliation has decided what it serves"}
FAILED = {"command": "build", "success": False, "counts": {"error": 1, "pass": 3},
          "failed": [{"unique_id": "test.kappa_marts.net_is_positive"}]}
PASSED = {"command": "docs generate", "success": True, "counts": {"success": 1}}


@pytest.fixture
def steps(monkeypatch):
    outcome: list[dict] = []
    monkeypatch.setattr("spark_apps.cli._spark", lambda *a: object())
    monkeypatch.setattr("spark_apps.serving.dbt_runner.run_steps", lambda *a, **k: outcome)
    return outcome


def test_a_refused_step_prints_its_refusal_and_no_summary_of_failed_nodes(steps, capsys):
    steps.extend([REFUSED, PASSED])
    assert main(["dbt", "build", "docs"]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"kappa dbt {REFUSED['command']}: {REFUSED['refused']}"]


def test_a_step_dbt_ran_and_failed_is_summed_up_with_its_failed_nodes(steps, capsys):
    steps.extend([REFUSED, FAILED])
    assert main(["dbt", "freshness", "build"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == f"kappa dbt {REFUSED['command']}: {REFUSED['refused']}"
    assert err[1].startswith("kappa dbt: 1 failed; on-call has been alerted; log ")
