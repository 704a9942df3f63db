"""Blue/green Kappa replay against the real broker and Spark: a changed gold definition is streamed into a new
generation beside the serving one, proven against a batch recomputed by the same new code, served by one swap,
and rolled back; a generation that differs from the batch is never served.

The tests run in order on one small stream: build, a failed reconciliation, an exact one and the swap, rollback.
"""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from spark_apps.cli import main
from spark_apps.core.errors import PlatformError
from spark_apps.io import stream_store
from spark_apps.io.catalog import table_path
from spark_apps.io.topics import admin_client
from spark_apps.marketplace.pipeline import MERCHANT_REVENUE, PIPELINE
from spark_apps.serving import replay
from spark_apps.serving import state as serving
from spark_apps.serving.state import KAPPA, LAMBDA, Decision
from spark_apps.target import generations
from spark_apps.target.generations import FAILED, RECONCILED, ROLLED_BACK, ReplayRefused
from spark_apps.target.resolution import resolve, target_of
from tests.support.streams import (
    add_to_gold,
    fresh_stream_settings,
    produce_hard_cases,
    read_stream_table,
    restore_store,
    run_stream,
)

pytestmark = pytest.mark.integration
GOLD = [PIPELINE.tables().gold(g.name) for g in PIPELINE.gold_tables]
REVENUE_VIEW = "serving.merchant_revenue"


# The gold definition being deployed: the old one plus the net amount in whole currency units.
REVENUE_V2 = dataclasses.replace(MERCHANT_REVENUE, fold=dataclasses.replace(MERCHANT_REVENUE.fold, output=(
    *MERCHANT_REVENUE.fold.output, "CAST(floor((gross_cents - refunds_cents) / 100) AS BIGINT) AS net_units")))
CHANGED = dataclasses.replace(PIPELINE, gold_tables=(REVENUE_V2, *PIPELINE.gold_tables[1:]))


@pytest.fixture(scope="module")
def platform(kafka_broker, spark, settings, tmp_path_factory, webhook):
    """A small log streamed into the base generation by the old code, every gold view serving that stream."""
    topic = f"test.replay.{uuid.uuid4().hex[:8]}"
    local = fresh_stream_settings(settings, tmp_path_factory.mktemp("replay"), topic, max_offsets=100_000) \
        .with_overrides(alert_webhook_url=f"{webhook.url}/replay")
    manifest, _ = produce_hard_cases(local, total=300, seed=21)
    run_stream(spark, local)
    serving.record(spark, local, PIPELINE, [
        Decision(t, KAPPA, LAMBDA, "test: the base generation has earned kappa", "seed", (), t, None) for t in GOLD])
    yield local, manifest
    with admin_client(settings) as admin:
        admin.delete_topics([topic])


def read(spark, settings, table: str):
    """A table of this warehouse: a stream table by its view over the store, any other by its folder."""
    if table.startswith("gold."):
        return read_stream_table(spark, settings, table, CHANGED if table.endswith("__g1") else PIPELINE)
    return spark.read.format("delta").load(str(table_path(settings, table)))


def version(spark, settings, table: str) -> int:
    """The newest version of the Delta table behind ``table``: a stream table's is its store's."""
    if table.startswith("gold."):
        generation = table.rpartition("__")[2] if "__" in table else ""
        return stream_store.latest_version(settings, target_of(settings, PIPELINE, generation))
    return spark.sql(f"DESCRIBE HISTORY delta.`{table_path(settings, table)}` LIMIT 1").first().version


def served_sources(spark) -> dict[str, str]:
    """What each serving view reads, from the properties the view was created with."""
    return {view: spark.sql(f"SHOW TBLPROPERTIES {view} ('kappa.serving.source')").first().value
            for view in map(serving.serving_view, GOLD)}


def same_rows(left, right) -> bool:
    return left.exceptAll(right).count() == 0 and right.exceptAll(left).count() == 0


def test_a_replay_builds_a_new_generation_while_the_old_one_keeps_serving(spark, platform):
    local, manifest = platform
    before = {t: version(spark, local, t) for t in GOLD}
    built = replay.build(spark, local, CHANGED, reason="net in whole units")
    assert built.generation == "g1" and built.records == manifest.total_records
    assert built.checkpoint.name == "marketplace__g1" and (local.checkpoint_root / "marketplace").is_dir()
    assert "net_units" in read(spark, local, "gold.merchant_revenue__g1").columns
    assert {t: version(spark, local, t) for t in GOLD} == before, "the serving generation is untouched"
    assert generations.active(spark, local, PIPELINE.name) == ""
    assert served_sources(spark) == {serving.serving_view(t): t for t in GOLD}
    assert "net_units" not in spark.table(REVENUE_VIEW).columns


def test_a_generation_that_differs_from_the_batch_is_not_served(spark, platform, webhook):
    local, _ = platform
    table = "gold.merchant_revenue__g1"
    row = read(spark, local, table).orderBy("merchant_id", "window_start").first()
    clean = add_to_gold(spark, local, table, "orders", 1, {"merchant_id": row.merchant_id,
                                                            "window_start": row.window_start}, CHANGED)
    decided = serving.current(spark, local, PIPELINE.name)
    try:
        outcome = replay.audit_generation(spark, local, CHANGED, "g1")
    finally:
        restore_store(spark, local, table, clean, CHANGED)
    assert not outcome["success"] and outcome["status"] == FAILED
    assert [t["table"] for t in outcome["tables"] if not t["success"]] == ["gold.merchant_revenue"]
    with pytest.raises(ReplayRefused, match=r"^cannot swap in generation g1: it is failed \(run replay\.g1\."):
        replay.swap(spark, local, CHANGED, "g1")
    with pytest.raises(PlatformError, match="not the tables of the active generation base"):
        serving.advance(spark, local, CHANGED, outcome["run_id"])
    assert serving.current(spark, local, PIPELINE.name) == decided
    assert served_sources(spark) == {serving.serving_view(t): t for t in GOLD}
    alert = read(spark, local, "audit.alerts").where("dedup_key = 'replay:marketplace:g1'").first()
    assert alert.severity == "warning" and alert.runbook.endswith("#replay-failed")
    assert [(b["dedup_key"], b["action"]) for b in webhook.bodies("/replay")] == [("replay:marketplace:g1", "trigger")]


def test_an_exact_reconciliation_swaps_every_view_to_the_new_generation_in_one_commit(spark, platform, webhook):
    """As the replay DAG's task runs it (`kappa replay reconcile --swap`), then again as its retry would."""
    local, _ = platform
    state = serving.SERVING_STATE_TABLE
    commits = version(spark, local, state)
    swapped = replay.run_action(spark, local, CHANGED, "", "reconcile", "g1", run_id="replay.g1.exact",
                                reason="net in whole units", swap_after=True)
    outcome, decisions = swapped.reconciled, list(swapped.decisions)
    assert outcome["success"] and outcome["status"] == RECONCILED and outcome["generation"] == "g1"
    assert swapped.swapped and version(spark, local, state) == commits + 1, "every view moves in one commit"
    assert {d.table: (d.mode, d.source_table, d.source_version) for d in decisions} == {
        t: (KAPPA, f"{t}__g1", None) for t in GOLD}
    assert all(d.run_id == outcome["run_id"] and d.reason.startswith(
        f"blue/green replay g1 reconciled by run {outcome['run_id']}") for d in decisions)
    assert served_sources(spark) == {serving.serving_view(t): f"{t}__g1" for t in GOLD}
    assert same_rows(spark.table(REVENUE_VIEW), read(spark, local, "gold.merchant_revenue__g1"))
    assert "net_units" in spark.table(REVENUE_VIEW).columns
    assert resolve(spark, local, PIPELINE.name).generation == "g1", "stream and audit follow the active one"
    assert [(b["dedup_key"], b["action"]) for b in webhook.bodies("/replay")] == [
        ("replay:marketplace:g1", "trigger"), ("replay:marketplace:g1", "resolve")], "the failed generation is proven"
    events = generations.read(spark, local, PIPELINE.name)
    retried = replay.run_action(spark, local, CHANGED, "", "reconcile", "g1", run_id="replay.g1.exact",
                                reason="net in whole units", swap_after=True)
    assert retried.reconciled["success"] and retried.swapped and retried.generation == "g1"
    assert version(spark, local, state) == commits + 1, "the rerun swaps nothing again"
    assert generations.read(spark, local, PIPELINE.name) == events, "the rerun records no generation event"
    replay.swap(spark, local, CHANGED, "g1")
    assert version(spark, local, state) == commits + 1, "swapping again changes nothing"
    assert read(spark, local, "gold.merchant_revenue").count() > 0, "the old generation is kept for rollback"


def test_a_rollback_serves_the_previous_generation_exactly_as_before(spark, platform):
    local, _ = platform
    decisions = replay.rollback(spark, local, CHANGED, "net_units breaks a dashboard")
    assert {d.table: (d.mode, d.source_table) for d in decisions} == {t: (KAPPA, t) for t in GOLD}
    assert served_sources(spark) == {serving.serving_view(t): t for t in GOLD}
    assert "net_units" not in spark.table(REVENUE_VIEW).columns
    events = generations.read(spark, local, PIPELINE.name)
    assert generations.active_generation(events) == "" and generations.latest(events)["g1"].status == ROLLED_BACK
    assert "net_units" in read(spark, local, "gold.merchant_revenue__g1").columns, "g1 is kept too"
    with pytest.raises(ReplayRefused, match="^generation base replaced no other generation; nothing to roll back"):
        replay.rollback(spark, local, CHANGED, "again")


def test_the_replay_command_shows_generations_and_refuses_in_one_line(platform, monkeypatch, capsys):
    local, _ = platform
    for key, value in local.as_env().items():
        monkeypatch.setenv(key, value)
    assert main(["replay", "status"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split()[:3] == ["*", "base", "active"]
    assert lines[-1].split()[:2] == ["g1", "rolled_back"]
    for args, message in (
            (["swap"], "no generation is reconciled; a generation is swapped in after an exact"),
            (["rollback"], "rollback needs --reason"),
            (["build", "--generation", "G-1"], "a generation name is a lowercase letter"),
            (["swap", "--generation", "g1"], "cannot swap in generation g1: it is rolled_back")):
        assert main(["replay", *args]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"kappa replay: error: {message}") and err.count("\n") == 1, err
