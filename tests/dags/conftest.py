"""The DAG tests run Airflow tasks, whose `kappa` commands register tables in the session's catalog database."""

import pytest


@pytest.fixture(autouse=True)
def catalog(catalog_database):
    return catalog_database
