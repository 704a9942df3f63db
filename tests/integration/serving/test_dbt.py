"""dbt over real stream + reconcile output, on the tests' shared SparkSession (dbt-spark ``session``)."""

from __future__ import annotations

import pytest

from spark_apps.core.paths import dbt_target
from spark_apps.io.catalog import table_path
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.serving import state as serving
from spark_apps.serving.dbt_runner import COMMANDS, DbtRefused, run_dbt, run_steps
from tests.support.streams import read_stream_table

pytestmark = pytest.mark.integration
NET_RULE = "expression_is_true_stg_merchant_revenue_net_cents_gross_cents_refunds_cents"


@pytest.fixture(scope="module")
def reconciled(spark, restarted_stream, audited, webhook, tmp_path_factory):
    """The audited shared stream with its serving views decided by that audit; dbt output in its own folder."""
    dbt_home = tmp_path_factory.mktemp("dbt")
    settings = restarted_stream.job.settings.with_overrides(
        dbt_target_dir=dbt_home / "target", dbt_log_dir=dbt_home / "logs", alert_webhook_url=f"{webhook.url}/hook")
    decisions = {d.table: d for d in serving.advance(spark, settings, PIPELINE, audited.run_id)}
    yield settings, decisions
    serving.register_views(spark, settings, PIPELINE)


@pytest.fixture(scope="module")
def built(spark, reconciled):
    settings, _ = reconciled
    return run_dbt(spark, settings, PIPELINE, COMMANDS["build"])


def mart(spark, settings, name: str):
    return spark.read.format("delta").load(str(table_path(settings, f"marts.{name}")))


def test_dbt_build_passes_models_data_tests_and_unit_tests_over_reconciled_tables(built):
    assert built.success, built.as_json()
    by_type: dict[str, set[str]] = {}
    for result in built.results:
        by_type.setdefault(result.resource_type, set()).add(result.status)
    assert by_type == {"model": {"success"}, "test": {"pass"}, "unit_test": {"pass"}}, by_type
    kinds = [r.unique_id for r in built.results]
    assert sum(i.startswith("unit_test.") for i in kinds) == 3
    assert any(".relationships_" in i for i in kinds) and any(".expression_is_true_" in i for i in kinds)
    assert built.served == {"serving.customer_sessions": "batch.customer_sessions@v0",
                            "serving.merchant_revenue": "batch.merchant_revenue@v0",
                            "serving.order_status": "batch.order_status@v0"}


def test_a_pipelines_dbt_artifacts_and_log_live_in_folders_of_its_own(reconciled, built):
    """Each pipeline's dbt DAG runs beside the others: a shared target folder would mix their run results."""
    settings, _ = reconciled
    assert built.target_dir == str(settings.dbt_target_dir / PIPELINE.name)
    assert (dbt_target(settings, PIPELINE.name) / "run_results.json").exists()
    assert (settings.dbt_log_dir / PIPELINE.name / "dbt.log").exists()
    assert sorted(p.name for p in settings.dbt_target_dir.iterdir()) == [PIPELINE.name]


def test_marts_are_delta_tables_in_the_warehouse_that_say_which_copy_they_read(spark, reconciled, built):
    settings, decisions = reconciled
    daily = mart(spark, settings, "merchant_daily_revenue")
    revenue = decisions["gold.merchant_revenue"]
    assert revenue.mode == serving.LAMBDA
    assert {r.served_from for r in daily.select("served_from").distinct().collect()} == {serving.served_from(revenue)}
    gold = read_stream_table(spark, settings, "gold.merchant_revenue")
    totals = ("sum(gross_cents) AS gross", "sum(refunds_cents) AS refunds", "sum(net_cents) AS net")
    assert daily.selectExpr(*totals).first() == gold.selectExpr(*totals).first(), "the stream equals the batch"
    funnel = mart(spark, settings, "order_funnel").selectExpr(
        "sum(orders_placed + orphan_payments + orphan_refunds) AS orders").first()["orders"]
    assert funnel == read_stream_table(spark, settings, "gold.order_status").count()
    sessions = mart(spark, settings, "customer_session_metrics").selectExpr("sum(sessions) AS n").first()["n"]
    assert sessions == read_stream_table(spark, settings, "gold.customer_sessions").count()


def test_a_negative_net_slipped_into_serving_fails_a_dbt_test_and_pages_on_call(spark, reconciled, built, webhook,
                                                                              monkeypatch):
    """The bad row is planted in the view itself, so dbt must read that view as it is, not re-register it."""
    settings, decisions = reconciled
    monkeypatch.setattr(serving, "register_views", lambda *_args, **_kwargs: None)
    revenue = decisions["gold.merchant_revenue"]
    daily_version = spark.sql(f"DESCRIBE HISTORY delta.`{table_path(settings, 'marts.merchant_daily_revenue')}`") \
        .first()["version"]
    victim = spark.table("serving.merchant_revenue").orderBy("merchant_id", "window_start").first()
    spark.sql(f"""CREATE OR REPLACE VIEW serving.merchant_revenue
        TBLPROPERTIES ('kappa.serving.mode' = 'lambda', 'kappa.serving.source' = '{serving.served_from(revenue)}')
        AS SELECT merchant_id, window_start, window_end, currency, orders, gross_cents, refunds_cents,
                  CASE WHEN merchant_id = '{victim.merchant_id}' AND window_start = TIMESTAMP '{victim.window_start}'
                       THEN -gross_cents - 1 ELSE net_cents END AS net_cents, distinct_customers
           FROM delta.`{table_path(settings, revenue.source_table)}` VERSION AS OF {revenue.source_version}""")
    broken = run_dbt(spark, settings, PIPELINE, COMMANDS["build"])
    monkeypatch.undo()
    serving.register_views(spark, settings, PIPELINE)

    assert not broken.success
    failed = {r.unique_id.split(".")[2]: r for r in broken.failed}
    assert NET_RULE in failed and failed[NET_RULE].failures == 1, broken.as_json()
    statuses = {r.unique_id: r.status for r in broken.results}
    assert statuses["model.kappa_marts.merchant_daily_revenue"] == "skipped", "nothing is built on the failed test"
    assert spark.sql(f"DESCRIBE HISTORY delta.`{table_path(settings, 'marts.merchant_daily_revenue')}`") \
        .first()["version"] == daily_version, "the mart keeps its last good build"

    pages = [b for b in webhook.bodies("/hook") if b.get("dedup_key") == "dbt:marketplace"]
    assert pages and pages[-1]["severity"] == "critical", webhook.received
    assert NET_RULE in pages[-1]["summary"] and pages[-1]["runbook"].endswith("docs/runbook.md#dbt-failed")
    recorded = spark.read.format("delta").load(str(table_path(settings, "audit.alerts"))) \
        .where("dedup_key = 'dbt:marketplace'").count()
    assert recorded >= 1

    rerun = run_dbt(spark, settings, PIPELINE, ["test", "--select", NET_RULE])  # on the views as serving decided
    assert rerun.success, rerun.as_json()
    assert [b["action"] for b in webhook.bodies("/hook") if b.get("dedup_key") == "dbt:marketplace"][-1] == "resolve"


def test_dbt_refuses_to_read_tables_no_reconciliation_has_decided(spark, isolated_home):
    with pytest.raises(DbtRefused, match="serving.merchant_revenue: no reconciliation has decided what it serves"):
        run_dbt(spark, isolated_home, PIPELINE, COMMANDS["build"])
    assert not (dbt_target(isolated_home, PIPELINE.name) / "run_results.json").exists(), "dbt did not start"


def test_dbt_steps_run_in_one_session_each_refusing_on_its_own_without_stopping_the_next(spark, isolated_home):
    """What the dbt DAG's one task runs (`kappa dbt freshness build`): each reading step checks the views itself."""
    steps = run_steps(spark, isolated_home, PIPELINE, ["freshness", "build"], select="source:serving+")
    assert [step["command"] for step in steps] == ["source freshness --select source:serving+",
                                                   "build --select source:serving+"]
    assert not any(step["success"] for step in steps)
    assert all("serving.merchant_revenue: no reconciliation has decided" in step["refused"] for step in steps)
    assert not (dbt_target(isolated_home, PIPELINE.name) / "run_results.json").exists(), "dbt did not start"
