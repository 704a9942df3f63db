"""What ``kappa reconcile --json`` writes, which the reconcile DAG's publish and verdict tasks read: from the outcome
object alone."""

from pathlib import Path

from spark_apps.audit.reconciliation import Reconciliation
from spark_apps.ops.scheduled_audit import Due, ScheduledReconciliation
from spark_apps.serving.state import KAPPA, LAMBDA, Decision

SUMMARY = {"run_id": "kappa_marketplace_reconcile.20260301T080000Z", "success": True, "tables": []}
RECONCILED = Reconciliation(SUMMARY["run_id"], reused=False, summary=SUMMARY, report=Path("r.html"))


def test_a_reconciliation_that_advanced_serving_carries_each_tables_decision_for_the_assets_it_publishes():
    decision = Decision("gold.a", KAPPA, LAMBDA, "2 of 2 exact", SUMMARY["run_id"], (SUMMARY["run_id"],), "gold.a",
                        7)
    result = ScheduledReconciliation("marketplace", RECONCILED, decisions=(decision,)).as_json()
    assert result["run_id"] == SUMMARY["run_id"] and result["success"] and result["report"] == "r.html"
    assert result["decisions"] == [decision.as_json()]
    assert (result["decisions"][0]["view"], result["decisions"][0]["source_version"]) == ("serving.a", 7)


def test_an_audit_only_run_carries_no_decision_and_a_skipped_one_only_its_reason():
    assert ScheduledReconciliation("marketplace", RECONCILED).as_json()["decisions"] == []
    skipped = ScheduledReconciliation("marketplace", None, Due(False, "audited 10 min ago")).as_json()
    assert skipped == {"skipped": True, "reason": "audited 10 min ago"}
