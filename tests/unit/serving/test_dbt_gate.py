"""When dbt may read the serving views: only views backed by a reconciliation that did not fail under them."""

from __future__ import annotations

from spark_apps.core.settings import Settings
from spark_apps.orchestration.tasks import DbtSources, dbt_sources
from spark_apps.serving.dbt_runner import refusals

VIEWS = {"gold.merchant_revenue": "serving.merchant_revenue", "gold.order_status": "serving.order_status"}


def test_views_on_batch_snapshots_of_passing_runs_are_allowed():
    served = {"gold.merchant_revenue": ("lambda", "batch.merchant_revenue"),
              "gold.order_status": ("kappa", "gold.order_status")}
    latest = {"gold.merchant_revenue": ("r2", True), "gold.order_status": ("r2", True)}
    assert refusals(VIEWS, served, latest) == []


def test_a_failed_replay_generation_does_not_block_views_reading_the_active_one():
    served = {"gold.merchant_revenue": ("kappa", "gold.merchant_revenue__g2"),
              "gold.order_status": ("kappa", "gold.order_status__g2")}
    latest = {"gold.merchant_revenue__g2": ("r4", True), "gold.order_status__g2": ("r4", True),
              "gold.merchant_revenue__g3": ("r5", False), "gold.order_status__g3": ("r5", False)}
    assert refusals(VIEWS, served, latest) == []


def test_a_view_reading_a_generation_whose_latest_run_failed_is_refused():
    served = {"gold.merchant_revenue": ("lambda", "batch.merchant_revenue"),
              "gold.order_status": ("kappa", "gold.order_status__g2")}
    latest = {"gold.order_status__g2": ("r6", False), "gold.merchant_revenue__g2": ("r6", False)}
    assert refusals(VIEWS, served, latest) == [
        "serving.order_status still reads the stream table gold.order_status__g2, but its latest reconciliation r6 "
        "failed; run `kappa serving advance --run-id r6` to switch it to the batch snapshot"]


def test_a_view_on_the_batch_snapshot_after_a_failed_run_is_allowed():
    served = {t: ("lambda", t.replace("gold.", "batch.")) for t in VIEWS}
    latest = {t: ("r3", False) for t in VIEWS}
    assert refusals(VIEWS, served, latest) == []


def test_a_view_still_reading_the_stream_after_its_latest_run_failed_is_refused():
    served = {"gold.merchant_revenue": ("lambda", "batch.merchant_revenue"),
              "gold.order_status": ("kappa", "gold.order_status")}
    latest = {"gold.merchant_revenue": ("r3", False), "gold.order_status": ("r3", False)}
    assert refusals(VIEWS, served, latest) == [
        "serving.order_status still reads the stream table gold.order_status, but its latest reconciliation r3 "
        "failed; run `kappa serving advance --run-id r3` to switch it to the batch snapshot"]


def test_a_never_reconciled_table_is_refused():
    served = {"gold.order_status": ("lambda", "batch.order_status")}
    assert refusals(VIEWS, served, {"gold.order_status": ("r1", True)}) == [
        "serving.merchant_revenue: no reconciliation has decided what it serves yet; run `kappa reconcile`"]


def test_the_dbt_dag_waits_for_exactly_the_serving_views_the_project_declares_as_sources():
    assert dbt_sources(Settings()) == {"marketplace": DbtSources(
        ("serving",), ("serving.merchant_revenue", "serving.order_status", "serving.customer_sessions"))}


def test_each_pipeline_gets_the_dbt_sources_that_name_it_and_selects_what_is_downstream_of_them(tmp_path):
    models = tmp_path / "models"
    (models / "a").mkdir(parents=True)
    (models / "a" / "_sources.yml").write_text(
        "version: 2\nsources:\n"
        "  - name: sensors_serving\n    schema: serving\n    config: {meta: {kappa_pipeline: sensors}}\n"
        "    tables: [{name: sensors_readings}]\n"
        "  - name: raw\n    schema: bronze\n    tables: [{name: events_raw}]\n"
        "  - name: serving\n    schema: serving\n    tables: [{name: order_status}]\n")
    found = dbt_sources(Settings(dbt_project_dir=tmp_path, pipeline="marketplace"))
    assert found == {"marketplace": DbtSources(("serving",), ("serving.order_status",)),
                     "sensors": DbtSources(("sensors_serving",), ("serving.sensors_readings",))}
    assert found["sensors"].selector == "source:sensors_serving+"


def test_a_source_that_names_no_pipeline_belongs_to_the_settings_pipeline_by_its_dag_name(tmp_path):
    """A pipeline given as module:attribute has DAGs named after its module; its sources must be found by it."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "_sources.yml").write_text(
        "version: 2\nsources:\n  - name: serving\n    schema: serving\n    tables: [{name: readings}]\n")
    found = dbt_sources(Settings(dbt_project_dir=tmp_path, pipeline="shop.my_pipeline:PIPELINE"))
    assert list(found) == ["my_pipeline"]
