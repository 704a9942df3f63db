"""What the chaos lab reads of the stream tables' commit logs: each table's latest version and the micro-batches
that committed to it, with a table the stream has not created yet and a maintenance commit among them."""

from __future__ import annotations

import json
from types import SimpleNamespace

from spark_apps.core.settings import Settings
from spark_apps.io.catalog import table_path
from spark_apps.lab.chaos import batches_in_table, table_versions

TABLES = ("bronze.events", "gold.order_status")


def lab_over(tmp_path) -> SimpleNamespace:
    settings = Settings(home=tmp_path)
    return SimpleNamespace(settings=settings, pipeline=SimpleNamespace(stream_table_names=lambda: list(TABLES)))


def commit(lab, table: str, version: int, operation: str, meta: dict | None) -> None:
    log = table_path(lab.settings, table) / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    info = {"operation": operation, **({"userMetadata": json.dumps(meta)} if meta else {})}
    (log / f"{version:020d}.json").write_text(json.dumps({"commitInfo": info}) + "\n")


def test_a_table_the_stream_has_not_created_has_version_minus_one_and_no_batch(tmp_path):
    lab = lab_over(tmp_path)
    commit(lab, "bronze.events", 0, "WRITE", {"app_id": "a", "batch_id": 0})
    assert table_versions(lab) == {"bronze.events": 0, "gold.order_status": -1}
    assert batches_in_table(lab, "gold.order_status") == set()


def test_the_batches_of_a_table_are_its_stream_commits_and_a_maintenance_commit_names_none(tmp_path):
    lab = lab_over(tmp_path)
    commit(lab, "gold.order_status", 0, "CREATE TABLE", None)
    commit(lab, "gold.order_status", 1, "MERGE", {"app_id": "a", "batch_id": 0})
    commit(lab, "gold.order_status", 2, "MERGE", {"app_id": "a", "batch_id": 1})
    commit(lab, "gold.order_status", 3, "OPTIMIZE", {"kind": "maintenance"})
    assert batches_in_table(lab, "gold.order_status") == {0, 1}
    assert table_versions(lab)["gold.order_status"] == 3
