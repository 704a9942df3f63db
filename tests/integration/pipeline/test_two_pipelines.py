"""Two pipelines on one platform: the marketplace and the tests' sensor pipeline (another schema, topic, table
prefix and keys) share one broker, one warehouse, one ledger, one serving state and one alert outbox.

Each goes the whole way: produce, stream (as two `kappa stream` processes at the same time), an exact audit
(K=1), cutover to the stream, a replay into a new generation that is swapped in, and an injected mismatch
that falls back to the batch and pages on-call. At every step the other pipeline's tables, ledger rows, serving
decisions, generations and alerts stay its own.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import uuid

import pytest
from pyspark.sql import functions as F

from spark_apps.alerts.dispatch import recent_alerts
from spark_apps.core.settings import PROJECT_ROOT
from spark_apps.io import stream_store
from spark_apps.io.catalog import table_path
from spark_apps.io.topics import ensure_topic
from spark_apps.marketplace.pipeline import PIPELINE as MARKETPLACE
from spark_apps.ops.scheduled_audit import reconcile
from spark_apps.ops.status import render, statuses
from spark_apps.pipeline.declaration import load_pipeline
from spark_apps.serving import replay
from spark_apps.serving import state as serving
from spark_apps.stream.job import StreamJob
from spark_apps.target import generations
from spark_apps.target.resolution import declared, resolve, target_of
from tests.support.records import send, sensor_reading
from tests.support.streams import add_to_gold, fresh_stream_settings, produce_hard_cases, read_stream_table
from tests.support.topics import delete_topics

pytestmark = pytest.mark.integration

SENSORS_SPEC = "tests.support.sensor_pipeline:PIPELINE"
SENSORS = load_pipeline(SENSORS_SPEC)
SPECS = {MARKETPLACE.name: MARKETPLACE.name, SENSORS.name: SENSORS_SPEC}
PIPELINES = {MARKETPLACE.name: MARKETPLACE, SENSORS.name: SENSORS}
# One exact audit moves a pipeline to the stream here: the streak of K runs is the Airflow tests' to prove, and each
# audit costs minutes on two cores.
EXACT_RUNS = 1


def produce_round(settings, round_: int) -> None:
    """120 marketplace events and 30 on-time readings of three devices, new ids each round."""
    produce_hard_cases(settings, total=120, seed=40 + round_)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    send(settings, SENSORS.topic, [sensor_reading(f"s{i}", now - dt.timedelta(seconds=i % 50), f"dev-{i % 3}")
                                   for i in range(round_ * 30, round_ * 30 + 30)])


def served_tables(name: str) -> list[str]:
    """The gold tables as serving names them, whichever generation's copy a view reads."""
    pipeline = PIPELINES[name]
    return sorted(pipeline.tables().gold(g.name) for g in pipeline.gold_tables)


def snapshot(spark, settings, name: str) -> dict:
    """What of one pipeline another pipeline's step must leave alone: serving, generation, ledger rows, and the
    version of its store (a write that keeps the row count still makes a version)."""
    from spark_apps.audit.ledger import LEDGER_TABLE

    ledger = table_path(settings, LEDGER_TABLE)
    runs = spark.read.format("delta").load(str(ledger)).where(f"pipeline = '{name}'").select(
        "run_id", "table", "success").collect() if (ledger / "_delta_log").exists() else []
    return {"serving": serving.current(spark, settings, name),
            "generation": generations.active(spark, settings, name),
            "ledger": sorted(tuple(r) for r in runs),
            "store": stream_store.latest_version(
                settings, target_of(settings, PIPELINES[name], generations.active(spark, settings, name)))}


def reconcile_pages(spark, settings) -> list[tuple[str, str]]:
    """(severity, dedup key) of every reconciliation alert recorded so far, newest first."""
    return [(a["severity"], a["dedup_key"]) for a in recent_alerts(spark, settings, 1000)
            if a["dedup_key"].startswith("reconcile:")]


@pytest.fixture(scope="module")
def platform(kafka_broker, spark, settings, tmp_path_factory):
    home = tmp_path_factory.mktemp("two-pipelines")
    topic = f"test.two.{uuid.uuid4().hex[:8]}"
    local = fresh_stream_settings(settings, home, topic, max_offsets=100_000).with_overrides(
        serving_exact_runs=EXACT_RUNS, serving_min_span_s=0, alerts_outbox=home / "alerts" / "outbox.jsonl")
    ensure_topic(local, SENSORS.topic, 2)
    yield local
    delete_topics(settings, [topic, SENSORS.topic])


def test_two_pipelines_stream_side_by_side_cut_over_replay_and_alert_without_touching_each_other(
        spark, platform, tmp_path):
    local = platform
    produce_round(local, 0)
    logs = {name: tmp_path / f"{name}-stream.log" for name in SPECS}
    streams = {name: subprocess.Popen([sys.executable, "-m", "spark_apps.cli", "stream", "--pipeline", spec],
                                      env={**os.environ, **local.as_env()}, cwd=PROJECT_ROOT,
                                      stdout=logs[name].open("w"), stderr=subprocess.STDOUT)
               for name, spec in SPECS.items()}
    try:
        for name, stream in streams.items():
            assert stream.wait(timeout=900) == 0, logs[name].read_text()[-3000:]
    finally:
        for stream in streams.values():
            if stream.poll() is None:
                stream.kill()
                stream.wait()
    assert sorted(p.name for p in local.checkpoint_root.iterdir() if p.is_dir()) == ["marketplace", "sensors_sensors"]

    for name, spec in SPECS.items():
        other = next(n for n in SPECS if n != name)
        before = snapshot(spark, local, other)
        outcome = reconcile(spark, local, resolve(spark, local, spec), run_id=f"{name}.exact")
        assert outcome.reconciliation.success, outcome.reconciliation.lines
        assert snapshot(spark, local, other) == before, f"{name}'s audit moved {other}"

    for name in SPECS:
        decisions = serving.current(spark, local, name)
        assert sorted(decisions) == served_tables(name)
        assert {d.mode for d in decisions.values()} == {serving.KAPPA}, decisions
        assert {d.run_id for d in decisions.values()} == {f"{name}.exact"}
    found = statuses(local, [declared(local, SPECS[name]) for name in SPECS],
                     lambda: pytest.fail("the ledger and the serving state read without Spark"))
    assert {(s.pipeline, s.last_audit.run_id, s.last_audit.success) for s in found} == {
        (name, f"{name}.exact", True) for name in SPECS}
    assert {s.pipeline: s.serving for s in found} == {
        name: {table: d.mode for table, d in serving.current(spark, local, name).items()} for name in SPECS}
    screen = render(found, dt.datetime.now())
    for name, pipeline in PIPELINES.items():
        gold = len(pipeline.gold_tables)
        assert any(line.startswith(name) and f"{gold} of {gold} from the stream" in line
                   for line in screen.splitlines()), screen

    for name, spec in SPECS.items():
        other = next(n for n in SPECS if n != name)
        before = snapshot(spark, local, other)
        base = generations.active(spark, local, name)
        outcome = replay.run_action(spark, local, PIPELINES[name], spec, "start", swap_after=True,
                                    reason="test: a new generation")
        assert outcome.swapped and not outcome.failed, outcome.status_lines()
        assert generations.active(spark, local, name) == outcome.generation != base
        served = serving.current(spark, local, name)
        assert sorted(served) == served_tables(name)
        assert all(d.source_table.endswith(f"__{outcome.generation}") for d in served.values()), served
        assert snapshot(spark, local, other) == before, f"{name}'s replay moved {other}"

    produce_round(local, 1)
    for name in SPECS:
        StreamJob(spark, local, resolve(spark, local, SPECS[name])).run(until_caught_up=True)
    assert not reconcile_pages(spark, local), "nothing paged while both pipelines were exact"
    # Per pipeline: the gold table to corrupt, the change, and the key column whose least value picks the rows.
    corruptions = {SENSORS.name: ("device_hourly", "readings", "device_id"),
                   MARKETPLACE.name: ("order_status", "paid_cents", "order_id")}
    for name, (gold, column, key) in corruptions.items():
        other = next(n for n in SPECS if n != name)
        before, pages_before = snapshot(spark, local, other), reconcile_pages(spark, local)
        table = PIPELINES[name].tables().gold(gold)
        active = PIPELINES[name].tables(generations.active(spark, local, name)).gold(gold)
        least = read_stream_table(spark, local, active, PIPELINES[name]).agg(F.min(key)).first()[0]
        add_to_gold(spark, local, active, column, 1, {key: least}, PIPELINES[name])
        failed = reconcile(spark, local, resolve(spark, local, SPECS[name]), run_id=f"{name}.corrupted")
        assert not failed.reconciliation.success
        decision = serving.current(spark, local, name)[table]
        assert (decision.mode, decision.previous_mode) == (serving.LAMBDA, serving.KAPPA)
        pages = reconcile_pages(spark, local)
        new = pages[:len(pages) - len(pages_before)]
        assert ("critical", f"reconcile:{name}:{table}") in new, new
        assert all(dedup.startswith(f"reconcile:{name}:") for _, dedup in new), new
        assert snapshot(spark, local, other) == before, f"{name}'s failed audit moved {other}"

    found = statuses(local, [declared(local, spec) for spec in SPECS.values()], lambda: spark)
    screen = render(found, dt.datetime.now())
    for name, (gold, _, _) in corruptions.items():
        line = next(line for line in screen.splitlines() if line.startswith(name))
        assert "FAILED" in line and gold in line, screen
