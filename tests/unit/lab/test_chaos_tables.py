"""What the chaos lab reads of the stream store's commit log: its latest version and the micro-batches it holds,
with a store the stream has not created yet and a maintenance commit among them."""

from __future__ import annotations

import json
from types import SimpleNamespace

from spark_apps.core.settings import Settings
from spark_apps.io.catalog import table_path
from spark_apps.lab.chaos import batches_in_store, store_version
from spark_apps.marketplace.pipeline import PIPELINE


def lab_over(tmp_path) -> SimpleNamespace:
    return SimpleNamespace(settings=Settings(home=tmp_path), pipeline=PIPELINE)


def commit(lab, version: int, operation: str, meta: dict | None) -> None:
    log = table_path(lab.settings, PIPELINE.tables().store) / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    info = {"operation": operation, **({"userMetadata": json.dumps(meta)} if meta else {})}
    (log / f"{version:020d}.json").write_text(json.dumps({"commitInfo": info}) + "\n")


def test_a_store_the_stream_has_not_created_has_version_minus_one_and_no_batch(tmp_path):
    lab = lab_over(tmp_path)
    assert store_version(lab) == -1
    assert batches_in_store(lab) == set()


def test_the_batches_of_the_store_are_its_stream_commits_and_a_maintenance_commit_names_none(tmp_path):
    lab = lab_over(tmp_path)
    commit(lab, 0, "CREATE TABLE", None)
    commit(lab, 1, "WRITE", {"app_id": "a", "batch_id": 0})
    commit(lab, 2, "WRITE", {"app_id": "a", "batch_id": 1})
    commit(lab, 3, "OPTIMIZE", {"kind": "maintenance"})
    assert batches_in_store(lab) == {0, 1}
    assert store_version(lab) == 3
