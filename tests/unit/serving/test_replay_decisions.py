"""Blue/green replay decisions from recorded events alone: which generation is active, what a swap and a
rollback serve, and what they refuse."""

import pytest

from spark_apps.serving.replay import ReconciledTable, rollback_decisions, swap_decisions
from spark_apps.serving.state import KAPPA, LAMBDA, Decision
from spark_apps.target.generations import (
    ACTIVE,
    BUILDING,
    BUILT,
    FAILED,
    RECONCILED,
    RETIRED,
    ROLLED_BACK,
    GenerationEvent,
    ReplayRefused,
    active_generation,
    check_build,
    check_name,
    check_status,
    next_name,
    previous_of,
    resumable,
    spec_for,
    swap_run_of,
    unfinished,
)

P = "marketplace"


def ev(generation: str, status: str, run_id: str = "", previous: str | None = None, spec: str = "") -> GenerationEvent:
    return GenerationEvent(P, generation, status, spec, previous, run_id)


def swapped_to_g1() -> list[GenerationEvent]:
    return [ev("g1", BUILDING, spec="new:PIPELINE"), ev("g1", BUILT), ev("g1", RECONCILED, "replay.g1.1"),
            ev("g1", ACTIVE, "replay.g1.1", previous=""), ev("", RETIRED, "replay.g1.1")]


def test_the_base_generation_serves_until_a_swap_and_again_after_its_rollback():
    assert active_generation([]) == ""
    assert active_generation([ev("g1", BUILDING), ev("g1", BUILT), ev("g1", RECONCILED, "r")]) == ""
    events = swapped_to_g1()
    assert active_generation(events) == "g1"
    events += [ev("", ACTIVE, "rollback.g1.1", previous=None), ev("g1", ROLLED_BACK, "rollback.g1.1")]
    assert active_generation(events) == ""


def test_names_are_never_reused_and_an_interrupted_build_is_resumed():
    assert next_name([]) == "g1"
    assert next_name(swapped_to_g1() + [ev("g7", FAILED, "r")]) == "g8"
    assert resumable([ev("g1", BUILDING), ev("g1", BUILT), ev("g2", BUILDING)]) == "g2"
    assert resumable([ev("g1", BUILDING), ev("g1", BUILT)]) is None


def test_a_build_never_touches_a_generation_that_serves_or_is_kept_for_rollback():
    events = swapped_to_g1()
    for generation in ("g1", ""):
        with pytest.raises(ReplayRefused, match="a replay builds a new generation"):
            check_build(events, generation, "")
    check_build(events, "g2", "")
    with pytest.raises(ReplayRefused, match="built by new:PIPELINE, not other:PIPELINE"):
        check_build([ev("g3", BUILDING, spec="new:PIPELINE")], "g3", "other:PIPELINE")
    with pytest.raises(ReplayRefused, match="lowercase letter"):
        check_name("G-2")


def test_only_a_reconciled_generation_can_be_swapped_in_and_the_refusal_says_why():
    events = [ev("g1", BUILDING), ev("g1", BUILT), ev("g1", FAILED, "replay.g1.7")]
    with pytest.raises(ReplayRefused) as refused:
        check_status(events, "g1", (RECONCILED, ACTIVE), "swap in")
    assert str(refused.value) == ("cannot swap in generation g1: it is failed (run replay.g1.7), "
                                  "needs reconciled or active")
    with pytest.raises(ReplayRefused, match="no generation g9"):
        check_status(events, "g9", (RECONCILED,), "swap in")


def test_an_active_event_without_serving_decisions_is_an_interrupted_switch():
    events = swapped_to_g1()
    assert unfinished(events, set()) == events[3]
    assert unfinished(events, {"replay.g1.1"}) is None
    assert unfinished([], set()) is None


def test_a_generation_remembers_its_code_the_swap_that_made_it_serve_and_what_it_replaced():
    events = swapped_to_g1() + [ev("g2", ACTIVE, "replay.g2.1", previous="g1"), ev("g1", RETIRED, "replay.g2.1"),
                                ev("g1", ACTIVE, "rollback.g2.1", previous=""), ev("g2", ROLLED_BACK, "rollback.g2.1")]
    assert spec_for(events, "g1", "marketplace") == "new:PIPELINE"
    assert spec_for(events, "", "marketplace") == "marketplace"
    assert swap_run_of(events, "g1") == "replay.g1.1", "a rollback back to g1 is not its swap"
    assert previous_of(events, "g1") == "" and previous_of(events, "") is None


# ---- serving decisions -----------------------------------------------------------------------------------------

def decision(table: str, mode: str, source: str, version: int | None, run_id: str) -> Decision:
    return Decision(table, mode, mode, "why", run_id, (run_id,), source, version)


RECONCILED_G2 = [ReconciledTable("gold.order_status", "gold.order_status__g2", "batch.order_status", 40),
                 ReconciledTable("gold.merchant_revenue", "gold.merchant_revenue__g2", "batch.merchant_revenue", 41),
                 ReconciledTable("gold.customer_sessions", "gold.customer_sessions__g2", "batch.customer_sessions", 42)]


def test_a_swap_moves_every_gold_table_to_the_new_generation_keeping_its_mode():
    current = {"gold.order_status": decision("gold.order_status", KAPPA, "gold.order_status", None, "r5"),
               "gold.merchant_revenue": decision("gold.merchant_revenue", LAMBDA, "batch.merchant_revenue", 30, "r5")}
    decisions = {d.table: d for d in swap_decisions(current, RECONCILED_G2, "g2", "replay.g2.1", "new rounding")}
    status, revenue, sessions = (decisions[t] for t in ("gold.order_status", "gold.merchant_revenue",
                                                        "gold.customer_sessions"))
    assert (status.mode, status.source_table, status.source_version) == (KAPPA, "gold.order_status__g2", None)
    assert (revenue.mode, revenue.source_table, revenue.source_version) == (LAMBDA, "batch.merchant_revenue", 41)
    assert (sessions.mode, sessions.source_version) == (LAMBDA, 42), "a table never decided starts on lambda"
    assert all(d.run_id == "replay.g2.1" and d.evidence == ("replay.g2.1",) and not d.changed
               for d in decisions.values())
    assert status.reason == ("blue/green replay g2 reconciled by run replay.g2.1; serves its stream table: "
                             "new rounding")


def test_a_rollback_restores_exactly_what_each_view_served_before_the_swap():
    before = [decision("gold.order_status", LAMBDA, "batch.order_status", 3, "r1"),
              decision("gold.order_status", KAPPA, "gold.order_status", None, "r4"),
              decision("gold.merchant_revenue", LAMBDA, "batch.merchant_revenue", 9, "r4")]
    after = swap_decisions({d.table: d for d in before}, RECONCILED_G2[:2], "g2", "replay.g2.1")
    later = [decision("gold.order_status", LAMBDA, "batch.order_status", 50, "r6")]
    restored = {d.table: d for d in rollback_decisions(before + after + later, "replay.g2.1", "g2", "", "rollback.g2.1",
                                                       "wrong rounding")}
    status, revenue = restored["gold.order_status"], restored["gold.merchant_revenue"]
    assert (status.mode, status.previous_mode, status.source_table, status.source_version) == (
        KAPPA, LAMBDA, "gold.order_status", None)
    assert (revenue.mode, revenue.source_table, revenue.source_version) == (LAMBDA, "batch.merchant_revenue", 9)
    assert status.evidence == ("r4",) and status.run_id == "rollback.g2.1"
    assert status.reason == "rollback of blue/green replay g2 to generation base: wrong rounding"


def test_a_rollback_refuses_without_a_swap_or_an_earlier_view():
    with pytest.raises(ReplayRefused, match="serving never moved to generation g2"):
        rollback_decisions([decision("gold.order_status", KAPPA, "gold.order_status", None, "r1")], "replay.g2.1",
                           "g2", "", "rollback.g2.1", "why")
    swapped = swap_decisions({}, RECONCILED_G2[:1], "g2", "replay.g2.1")
    with pytest.raises(ReplayRefused, match="gold.order_status served nothing before generation g2"):
        rollback_decisions(swapped, "replay.g2.1", "g2", "", "rollback.g2.1", "why")


def test_status_lists_the_base_generation_first_and_marks_the_active_one():
    from spark_apps.serving.replay import status_lines

    assert [line.split()[:3] for line in status_lines([ev("g1", BUILT)])] == [["*", "base", "active"],
                                                                               ["g1", "built"]]
    lines = status_lines(swapped_to_g1())
    assert [line.split()[:2] for line in lines] == [["base", "retired"], ["*", "g1"]]
    assert "run replay.g1.1, code new:PIPELINE" in lines[1]
