"""A table folder whose `_delta_log` a crashed first create left empty is no table to the readers yet.

No Spark session is given: a reader that took the folder for a table would fail reading it."""

import pytest

from spark_apps.audit import ledger
from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import Settings
from spark_apps.io import delta_snapshot
from spark_apps.io.catalog import existing_table_path, read_if_present, table_path
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.serving import state as serving
from spark_apps.target import generations
from spark_apps.target.resolution import target_of


def half_created(settings: Settings, *tables: str) -> None:
    for table in tables:
        (table_path(settings, table) / "_delta_log").mkdir(parents=True)


def test_a_ledger_whose_log_a_crashed_create_left_empty_reads_as_no_runs_and_names_no_table(tmp_path):
    settings = Settings(home=tmp_path)
    half_created(settings, ledger.LEDGER_TABLE)
    assert read_if_present(None, settings, ledger.LEDGER_TABLE) is None
    assert ledger.run_rows(None, settings, "kappa_reconcile.20261202T000000Z") == []
    assert ledger.latest_runs(None, settings, PIPELINE.name) == {}
    assert delta_snapshot.rows(settings, ledger.LEDGER_TABLE, ["run_id"], spark=lambda: pytest.fail("no table")) == []
    assert serving.last_audit_at(None, settings, target_of(settings, PIPELINE)) is None
    with pytest.raises(PlatformError, match=f"no Delta table {ledger.LEDGER_TABLE} at"):
        existing_table_path(settings, ledger.LEDGER_TABLE)


def test_half_created_serving_state_and_generations_read_as_no_decisions_and_no_events(tmp_path):
    settings = Settings(home=tmp_path)
    half_created(settings, serving.SERVING_STATE_TABLE, generations.GENERATIONS_TABLE)
    assert serving.current(None, settings, PIPELINE.name) == {}
    assert serving.history(None, settings) == []
    assert generations.read(None, settings, PIPELINE.name) == []
