"""What a replay action reports (the CLI prints it and writes it as JSON): from the outcome object alone."""

from pathlib import Path

from spark_apps.serving.replay import Build, ReplayOutcome
from spark_apps.serving.state import KAPPA, Decision
from spark_apps.target.generations import ACTIVE, RECONCILED, GenerationEvent

P = "marketplace"
BUILT = Build("g1", Path("/tmp/checkpoint"), batches=3, records=300)


def reconciled(success: bool) -> dict:
    return {"run_id": "replay.g1.1", "success": success, "generation": "g1", "status": RECONCILED,
            "report": "r.html", "tables": []}


def test_a_failed_reconciliation_stops_the_start_before_the_swap_and_reports_no_generations():
    outcome = ReplayOutcome(P, "start", "g1", BUILT, reconciled(False))
    assert outcome.failed
    assert outcome.as_json() == {"pipeline": P, "generation": "g1", "batches": 3, "records": 300,
                                 **reconciled(False)}


def test_a_swap_reports_its_decisions_and_the_active_generation():
    decision = Decision("gold.a", KAPPA, KAPPA, "swap", "replay.g1.1", ("replay.g1.1",), "gold.a__g1", None)
    events = (GenerationEvent(P, "g1", ACTIVE, "", "", "replay.g1.1"),)
    outcome = ReplayOutcome(P, "swap", "g1", decisions=(decision,), swapped=True, events=events)
    result = outcome.as_json()
    assert not outcome.failed and result["swapped"] and result["active"] == "g1"
    assert result["decisions"] == [decision.as_json()] and result["decisions"][0]["view"] == "serving.a"
    assert [g["generation"] for g in result["generations"]] == ["g1"]
