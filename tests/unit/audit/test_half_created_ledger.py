"""A table folder whose `_delta_log` a crashed first create left empty is no table to the readers yet."""

import pytest

from spark_apps.audit import ledger
from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import Settings
from spark_apps.io.catalog import existing_table_path, table_path


def test_a_ledger_whose_log_a_crashed_create_left_empty_reads_as_no_runs_and_names_no_table(tmp_path):
    settings = Settings(home=tmp_path)
    (table_path(settings, ledger.LEDGER_TABLE) / "_delta_log").mkdir(parents=True)
    assert ledger.run_rows(None, settings, "kappa_reconcile.20261202T000000Z") == []
    with pytest.raises(PlatformError, match=f"no Delta table {ledger.LEDGER_TABLE} at"):
        existing_table_path(settings, ledger.LEDGER_TABLE)
