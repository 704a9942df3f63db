"""The whole path with the warehouse and the checkpoints on the object store (``KAPPA_WAREHOUSE_DIR=s3a://...``):
produce, stream, an exact full audit, cutover to the stream, an incremental audit, a replay into a new generation
swapped in, `kappa status` read without a JVM, then the SQL endpoint and dbt over the serving views, all against
the session's S3-compatible server, with nothing of it on the local disk."""

from __future__ import annotations

import datetime as dt

import pytest
from pyhive import hive

from spark_apps.io.catalog import registered_location, table_path
from spark_apps.io.spark_session import sql_endpoint_conf
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.ops.scheduled_audit import reconcile
from spark_apps.ops.status import render, statuses
from spark_apps.services.processes import free_port
from spark_apps.services.sql_endpoint import SqlEndpoint
from spark_apps.serving import replay
from spark_apps.serving import state as serving
from spark_apps.serving.dbt_runner import COMMANDS, run_dbt
from spark_apps.stream.job import StreamJob
from spark_apps.target import generations
from spark_apps.target.resolution import declared, resolve
from tests.support.object_store import stream_on_object_store
from tests.support.streams import produce_hard_cases

pytestmark = pytest.mark.integration
BUCKET = "kappa-lakehouse"


@pytest.fixture(scope="module")
def lakehouse(kafka_broker, spark, settings, object_store, tmp_path_factory):
    home = tmp_path_factory.mktemp("on-object-store")
    with stream_on_object_store(settings, object_store, BUCKET, home, max_offsets=100_000, serving_exact_runs=1,
                                serving_min_span_s=0) as lakehouse:
        yield lakehouse, home


def test_produce_stream_audit_cutover_and_replay_run_with_the_warehouse_on_the_object_store(
        spark, lakehouse, object_store):
    local, home = lakehouse
    produce_hard_cases(local, total=300, seed=91)
    StreamJob(spark, local, resolve(spark, local, PIPELINE.name)).run(until_caught_up=True)

    outcome = reconcile(spark, local, resolve(spark, local, PIPELINE.name), run_id="s3.exact")
    assert outcome.reconciliation.success, outcome.reconciliation.lines
    decisions = serving.current(spark, local, PIPELINE.name)
    assert sorted(decisions) == sorted(PIPELINE.tables().gold(g.name) for g in PIPELINE.gold_tables)
    assert {d.mode for d in decisions.values()} == {serving.KAPPA}, decisions

    bucket = object_store.paths.buckets_dir / BUCKET
    store = table_path(local, PIPELINE.tables().store)
    assert str(store).startswith(f"s3a://{BUCKET}/warehouse/")
    assert (bucket / store.key / "_delta_log").is_dir(), "the store's log is objects of the bucket"
    assert (bucket / "checkpoints" / PIPELINE.name / "commits").is_dir(), "so is the stream's checkpoint"
    assert not (home / "warehouse").exists() and not (home / "checkpoints").exists(), "nothing on the local disk"

    produce_hard_cases(local, total=120, seed=92)
    StreamJob(spark, local, resolve(spark, local, PIPELINE.name)).run(until_caught_up=True)
    extended = reconcile(spark, local, resolve(spark, local, PIPELINE.name), run_id="s3.incremental",
                         kind="incremental")
    assert extended.reconciliation.success, extended.reconciliation.lines
    assert extended.reconciliation.run.builds_on == "s3.exact", "the incremental run read the verified snapshot"

    found = statuses(local, [declared(local, PIPELINE.name)],
                     lambda: pytest.fail("the ledger and the serving state are read from the bucket without Spark"))
    assert [(s.last_audit.run_id, s.last_audit.success) for s in found] == [("s3.incremental", True)]
    gold = len(PIPELINE.gold_tables)
    assert f"{gold} of {gold} from the stream" in render(found, dt.datetime.now())

    base = generations.active(spark, local, PIPELINE.name)
    replayed = replay.run_action(spark, local, PIPELINE, PIPELINE.name, "start", swap_after=True,
                                 reason="test: a new generation on the object store")
    assert replayed.swapped and not replayed.failed, replayed.status_lines()
    assert generations.active(spark, local, PIPELINE.name) == replayed.generation != base
    served = serving.current(spark, local, PIPELINE.name)
    assert all(d.source_table.endswith(f"__{replayed.generation}") for d in served.values()), served
    assert (bucket / "checkpoints" / f"{PIPELINE.name}__{replayed.generation}" / "commits").is_dir()


def test_the_sql_endpoint_and_dbt_read_the_serving_views_on_the_object_store(spark, lakehouse, object_store):
    """Runs after the replay above: the views serve the swapped-in generation's tables, all in the bucket."""
    local, home = lakehouse
    served = local.with_overrides(sql_port=free_port(), dbt_target_dir=home / "dbt" / "target",
                                  dbt_log_dir=home / "dbt" / "logs")
    views = {table: serving.serving_view(table) for table in serving.current(spark, served, PIPELINE.name)}
    endpoint = SqlEndpoint(served, stop_with_parent=True)
    endpoint.start(sql_endpoint_conf(served))
    try:
        connection = hive.connect(host=served.sql_host, port=served.sql_port, username="analyst")
        cursor = connection.cursor()
        for table, view in views.items():
            cursor.execute(f"SELECT count(*) FROM {view}")
            assert cursor.fetchall()[0][0] == spark.table(view).count() > 0, table
        connection.close()
    finally:
        endpoint.stop()

    built = run_dbt(spark, served, PIPELINE, COMMANDS["build"])
    assert built.success, built.as_json()
    daily = registered_location(spark, "marts.merchant_daily_revenue")
    assert daily == f"s3a://{BUCKET}/warehouse/marts.db/merchant_daily_revenue", "dbt's marts are in the bucket"
    totals = "sum(net_cents) AS net"
    assert (spark.read.format("delta").load(daily).selectExpr(totals).first()
            == spark.table(views[PIPELINE.tables().gold("merchant_revenue")]).selectExpr(totals).first())
