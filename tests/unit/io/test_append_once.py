"""The stream's appends: a batch that runs for the first time appends without Delta's transaction check (which rebuilds
the table's whole state), and a batch that may be a replay appends only when the table holds no commit of it."""

import json
import uuid
from pathlib import Path

import pytest

from spark_apps.io.delta_writes import append_once, commit_metadata

SCHEMA = "id long"


@pytest.fixture
def table(spark, tmp_path):
    path = str(tmp_path / f"t-{uuid.uuid4().hex[:8]}")
    spark.sql(f"CREATE TABLE delta.`{path}` ({SCHEMA}) USING delta")
    return path


def append(spark, path, ids, batch_id, replayed, app_id="app"):
    with commit_metadata(spark, {"app_id": app_id, "batch_id": batch_id}):
        append_once(spark.createDataFrame([(i,) for i in ids], SCHEMA), path, app_id, batch_id, replayed)


def actions(path: str) -> list[dict]:
    return [json.loads(line) for commit in sorted(Path(path, "_delta_log").glob("*.json"))
            for line in commit.read_text().splitlines()]


def ids(spark, path):
    return sorted(r.id for r in spark.read.format("delta").load(path).collect())


def test_a_first_run_of_a_batch_appends_without_a_transaction_to_check(spark, table):
    append(spark, table, [1, 2], 0, replayed=False)
    append(spark, table, [3], 1, replayed=False)
    assert ids(spark, table) == [1, 2, 3]
    assert not [a for a in actions(table) if "txn" in a], "no transaction version that a later write must look up"
    assert [json.loads(a["commitInfo"]["userMetadata"])["batch_id"] for a in actions(table)
            if "commitInfo" in a and a["commitInfo"].get("userMetadata")] == [0, 1]


def test_a_replayed_batch_that_appended_before_is_skipped_and_one_that_did_not_appends(spark, table):
    append(spark, table, [1, 2], 0, replayed=False)
    append(spark, table, [1, 2], 0, replayed=True)
    assert ids(spark, table) == [1, 2], "the replay found its own commit"
    append(spark, table, [3], 1, replayed=True)
    assert ids(spark, table) == [1, 2, 3], "no commit of batch 1 yet: the replay appends"
    append(spark, table, [3], 1, replayed=True, app_id="other-app")
    assert ids(spark, table) == [1, 2, 3, 3], "another app's batch 1 is another batch"
