"""The serving state machine's decisions, from ledger evidence alone."""

import dataclasses
import datetime as dt

from spark_apps.core.settings import Settings
from spark_apps.serving.state import KAPPA, LAMBDA, RunEvidence, decide, serving_view

T0 = dt.datetime(2026, 11, 22, 8, 0, tzinfo=dt.UTC)
TABLE = "gold.order_status"


def run(n: int, success: bool = True, batch: int | None = None, minutes: int | None = None) -> RunEvidence:
    return RunEvidence(run_id=f"r{n}", started_at=T0 + dt.timedelta(minutes=60 * n if minutes is None else minutes),
                       stream_batch=("app", n if batch is None else batch), success=success,
                       stream_table=TABLE, snapshot_table="batch.order_status", snapshot_version=10 + n,
                       detail="" if success else "gold.order_status value_mismatch")


def settings(k: int = 3, span_s: int = 7200) -> Settings:
    return Settings(serving_exact_runs=k, serving_min_span_s=span_s)


def test_k_exact_runs_over_the_minimum_span_switch_to_the_stream():
    decision = decide(TABLE, LAMBDA, [run(0), run(1), run(2)], settings())
    assert decision.mode == KAPPA and decision.changed
    assert decision.evidence == ("r0", "r1", "r2")
    assert (decision.source_table, decision.source_version) == (TABLE, None)


def test_fewer_than_k_exact_runs_keep_serving_the_pinned_batch_snapshot():
    decision = decide(TABLE, LAMBDA, [run(0), run(1)], settings())
    assert decision.mode == LAMBDA and not decision.changed
    assert (decision.source_table, decision.source_version) == ("batch.order_status", 11)
    assert "2 of 3" in decision.reason


def test_k_runs_within_less_than_the_minimum_span_do_not_switch():
    history = [run(0, minutes=0), run(1, minutes=10), run(2, minutes=20)]
    assert decide(TABLE, LAMBDA, history, settings()).mode == LAMBDA


def test_reruns_of_the_same_stream_batch_count_once():
    history = [run(0, batch=7), run(1, batch=7), run(2, batch=7), run(3, batch=8)]
    decision = decide(TABLE, LAMBDA, history, settings(k=3, span_s=0))
    assert decision.mode == LAMBDA and "2 of 3" in decision.reason


def test_a_failure_resets_the_streak():
    history = [run(0), run(1), run(2, success=False), run(3), run(4)]
    decision = decide(TABLE, LAMBDA, history, settings(span_s=0))
    assert decision.mode == LAMBDA and decision.evidence == ("r3", "r4")


def test_one_failed_run_falls_back_from_kappa_at_once():
    decision = decide(TABLE, KAPPA, [run(0), run(1), run(2), run(3, success=False)], settings())
    assert (decision.previous_mode, decision.mode) == (KAPPA, LAMBDA)
    assert decision.evidence == ("r3",)
    assert decision.source_table == "batch.order_status" and decision.source_version == 13
    assert "falls back" in decision.reason and "value_mismatch" in decision.reason


def test_an_exact_run_keeps_kappa():
    decision = decide(TABLE, KAPPA, [run(0, success=False), run(1)], settings())
    assert decision.mode == KAPPA and not decision.changed


def test_serving_views_drop_the_layer_prefix():
    assert serving_view("gold.merchant_revenue") == "serving.merchant_revenue"


def test_k_exact_incremental_runs_without_a_full_one_do_not_switch_to_the_stream():
    history = [dataclasses.replace(run(n), full=False) for n in range(4)]
    decision = decide(TABLE, LAMBDA, history, settings())
    assert decision.mode == LAMBDA and "none of them full" in decision.reason


def test_a_full_run_anywhere_in_the_streak_lets_incremental_runs_switch_to_the_stream():
    history = [run(0), *(dataclasses.replace(run(n), full=False) for n in range(1, 5))]
    decision = decide(TABLE, LAMBDA, history, settings())
    assert decision.mode == KAPPA and "r0" in decision.evidence, "the full run is part of the evidence"
