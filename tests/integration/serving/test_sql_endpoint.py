"""Serving to any SQL client at one consistent cut: the SQL endpoint (Spark's Thrift Server) over the shared catalog.

A real client reads the platform's tables by name: Spark's own beeline, and PyHive (the HiveServer2 protocol, the
client dbt's thrift target uses). While the stream moves the serving cut batch after batch, every read of all
serving views in one statement reflects one log prefix; a fallback is seen by a session opened before it.
"""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
from pyhive import hive

from spark_apps.audit.recompute import version_for_batch
from spark_apps.core.waiting import poll
from spark_apps.io import serving_cut
from spark_apps.io.catalog import table_path
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.ops.scheduled_audit import reconcile
from spark_apps.services.sql_endpoint import beeline_command
from spark_apps.serving import replay
from spark_apps.serving import state as serving
from spark_apps.serving.dbt_runner import COMMANDS, run_dbt
from spark_apps.stream.job import StreamJob
from spark_apps.target.resolution import resolve, target_of
from tests.support.streams import fresh_stream_settings, produce_hard_cases, read_stream_table, run_stream
from tests.support.topics import delete_topics

pytestmark = pytest.mark.integration


def member_rows(spark, settings, source: str, version: int) -> int:
    """The rows a cut member reads: a stream table's view of its store at the version, or a batch snapshot."""
    if source.startswith("gold."):
        return read_stream_table(spark, settings, source, version=version).count()
    return spark.read.format("delta").option("versionAsOf", version).load(str(table_path(settings, source))).count()
GOLD = sorted(PIPELINE.tables().gold(g.name) for g in PIPELINE.gold_tables)
# One statement over every serving view of the pipeline, and the cut that statement read.
EVERY_VIEW = " UNION ALL ".join(
    [f"SELECT '{serving_cut.CUT_BRANCH}' AS part, cut AS value FROM {serving_cut.cut_view(PIPELINE.name)} "
     f"WHERE served_table = '{serving_cut.CUT_BRANCH}'"]
    + [f"SELECT '{table}', CAST(count(*) AS string) FROM {serving.serving_view(table)}" for table in GOLD])


@pytest.fixture(scope="module")
def platform(kafka_broker, spark, settings, sql_endpoint, tmp_path_factory):
    """A stream that earned kappa in one exact reconciliation: its serving cut follows the stream."""
    topic = f"test.sql.{uuid.uuid4().hex[:8]}"
    local = fresh_stream_settings(settings, tmp_path_factory.mktemp("sql"), topic, max_offsets=100_000).with_overrides(
        serving_exact_runs=1, serving_min_span_s=0, trigger_interval_s=0.5)
    produce_hard_cases(local, total=300, seed=61)
    run_stream(spark, local)
    outcome = reconcile(spark, local, resolve(spark, local, PIPELINE.name), run_id="sql.exact")
    assert outcome.reconciliation.success, outcome.reconciliation.lines
    assert {d.mode for d in outcome.decisions} == {serving.KAPPA}
    yield local
    delete_topics(settings, [topic])


@pytest.fixture(scope="module")
def session(sql_endpoint, platform):
    """One HiveServer2 session, opened before anything below changes serving, and kept open."""
    connection = hive.connect(host=platform.sql_host, port=platform.sql_port, username="analyst")
    yield connection.cursor()
    connection.close()


def read_every_view(cursor) -> tuple[dict, dict[str, int]]:
    cursor.execute(EVERY_VIEW)
    rows = dict(cursor.fetchall())
    return json.loads(rows.pop(serving_cut.CUT_BRANCH)), {table: int(n) for table, n in rows.items()}


def test_every_read_of_all_serving_views_reflects_one_cut_while_the_stream_moves_it(spark, platform, session):
    first, _ = read_every_view(session)
    assert first["follows"] == serving_cut.FOLLOWS_STREAM
    job = StreamJob(spark, platform, target_of(platform, PIPELINE))
    query = job.start(until_caught_up=False)
    reads: list[tuple[dict, dict[str, int]]] = []
    try:
        for seed in range(62, 65):
            produce_hard_cases(platform, total=100, seed=seed)

            def moved() -> bool:
                assert query.isActive, query.exception()
                reads.append(read_every_view(session))
                return reads[-1][0]["basis"] != (reads[-2][0] if len(reads) > 1 else first)["basis"]

            # A read a second: many reads per micro-batch, and the stream keeps the cores it shares with them.
            assert poll(moved, timeout_s=300, every_s=1), "the stream did not move the serving cut"
    finally:
        query.stop()
        job.stopped()

    cuts = {json.dumps(cut, sort_keys=True): (cut, counts) for cut, counts in reads}
    assert len(cuts) >= 3, "reads were made while the cut moved, batch after batch"
    for cut, counts in cuts.values():
        offsets = {json.dumps(m["end_offsets"], sort_keys=True) for m in cut["members"]}
        assert len(offsets) == 1, f"one read saw tables at different log offsets: {cut}"
        batch_id, app_id = cut["basis"].removeprefix("batch ").split(" of ")
        store = table_path(platform, PIPELINE.tables().store)
        for member in cut["members"]:
            assert member["version"] == version_for_batch(store, app_id, int(batch_id)), member
            rows = member_rows(spark, platform, member["source"], member["version"])
            assert counts[member["table"]] == rows, f"{member['table']} read other rows than its cut's version"


def test_a_held_cut_stays_put_and_kappa_serving_prints_the_cut_with_its_offsets(spark, platform, monkeypatch,
                                                                                 capsys):
    """What a dbt run relies on: while it holds the lock, a micro-batch leaves the cut where it is."""
    from spark_apps.cli import main

    before = serving_cut.read(spark, PIPELINE.name)
    assert before is not None and before.follows == serving_cut.FOLLOWS_STREAM
    with serving_cut.locked(platform, PIPELINE.name):
        moved = serving_cut.follow_stream(spark, platform, target_of(platform, PIPELINE), "held-app", 10_000, {0: 1}, 0)
    assert moved is None and serving_cut.read(spark, PIPELINE.name) == before

    for key, value in platform.as_env().items():
        monkeypatch.setenv(key, value)
    assert main(["serving", "status"]) == 0
    out = capsys.readouterr().out
    offsets = ", ".join(f"p{p}={o}" for p, o in sorted(before.end_offsets.items()))
    assert f"cut of marketplace (moves with the stream, {before.basis}): offsets {offsets}" in out, out
    for member in before.members:
        assert f"reads {member.source} v{member.version}" in out


def test_a_fallback_is_seen_by_a_session_opened_before_it(spark, platform, session):
    session.execute("SHOW TBLPROPERTIES serving.order_status ('kappa.serving.mode')")
    assert session.fetchall()[0][1] == serving.KAPPA
    decisions = serving.fall_back(spark, platform, PIPELINE, "test: the batch serves again")
    assert {d.mode for d in decisions} == {serving.LAMBDA}

    session.execute("SHOW TBLPROPERTIES serving.order_status ('kappa.serving.mode')")
    assert session.fetchall()[0][1] == serving.LAMBDA
    cut, counts = read_every_view(session)
    assert cut["follows"] == serving_cut.FOLLOWS_AUDIT and cut["basis"] == "run sql.exact"
    served = {d.table: d for d in decisions}
    for member in cut["members"]:
        decision = served[member["table"]]
        assert (member["source"], member["version"]) == (decision.source_table, decision.source_version)
        assert counts[member["table"]] == member_rows(spark, platform, decision.source_table, decision.source_version)


def test_beeline_and_dbt_over_the_endpoint_read_serving_gold_and_marts_by_name(spark, platform):
    built = run_dbt(spark, platform, PIPELINE, [*COMMANDS["build"], "--target", "thrift"])
    assert built.success, built.as_json()
    assert {r.status for r in built.results if r.resource_type == "model"} == {"success"}
    queries = {"serving.order_status": "SELECT count(*) FROM serving.order_status",
               "gold.order_status": "SELECT count(*) FROM gold.order_status",
               "marts.order_funnel": "SELECT sum(orders_placed + orphan_payments + orphan_refunds) FROM "
                                     "marts.order_funnel"}
    done = subprocess.run(beeline_command(platform, "--outputformat=csv2", "--showHeader=false", "-e",
                                          "; ".join(queries.values()) + ";"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = dict(zip(queries, (int(line) for line in done.stdout.split()), strict=True))
    served = serving.current(spark, platform, PIPELINE.name)["gold.order_status"]
    snapshot = member_rows(spark, platform, served.source_table, served.source_version)
    stream = read_stream_table(spark, platform, "gold.order_status").count()
    assert got == {"serving.order_status": snapshot, "gold.order_status": stream,
                   "marts.order_funnel": snapshot}, done.stdout


def test_a_cutover_and_a_replay_swap_are_seen_by_a_session_opened_before_them(spark, platform, session):
    """After the fallback, an exact run of new stream batches cuts every table over to the stream again, and a replay
    swaps serving to a new generation: the session opened at the start reads each change at its next statement."""
    outcome = reconcile(spark, platform, resolve(spark, platform, PIPELINE.name), run_id="sql.cutover")
    assert outcome.reconciliation.success and {d.mode for d in outcome.decisions} == {serving.KAPPA}
    cut, _ = read_every_view(session)
    assert cut["follows"] == serving_cut.FOLLOWS_STREAM and cut["generation"] == ""
    assert {m["source"] for m in cut["members"]} == set(GOLD)

    replay.build(spark, platform, PIPELINE, reason="rebuild from offset 0")
    assert replay.audit_generation(spark, platform, PIPELINE)["success"]
    replay.swap(spark, platform, PIPELINE, reason="rebuild from offset 0")
    cut, counts = read_every_view(session)
    assert cut["generation"] == "g1" and {m["source"] for m in cut["members"]} == {f"{t}__g1" for t in GOLD}
    for member in cut["members"]:
        assert counts[member["table"]] == member_rows(spark, platform, member["source"], member["version"]), member
