"""Writes run at once keep their own session settings, stay idempotent, and fail the caller together."""

import json
import threading

import pytest
from delta.tables import DeltaTable

from spark_apps.io.delta_writes import TXN_APP_ID, USER_METADATA, commit_metadata, upsert_recomputed
from spark_apps.io.key_sets import key_set
from spark_apps.io.parallel_writes import in_parallel, write_in_parallel

pytestmark = pytest.mark.integration


def _history(spark, path: str) -> list:
    return DeltaTable.forPath(spark, path).history().orderBy("version").select("version", "operation",
                                                                             "userMetadata").collect()


def test_parallel_merges_keep_their_own_transaction_and_commit_metadata_and_skip_when_repeated(spark, tmp_path):
    paths = {name: str(tmp_path / name) for name in ("a", "b", "c")}
    for name, path in paths.items():
        spark.createDataFrame([(1, f"{name}-old")], "id INT, v STRING").write.format("delta").save(path)
    rows = spark.createDataFrame([(1, "new"), (2, "added")], "id INT, v STRING")
    affected = key_set(rows.select("id"), ("id",), in_driver=True)
    group = "test-parallel-writes"
    spark.sparkContext.setJobGroup(group, "parallel writes")

    def merges(batch_id: int) -> dict:
        return {name: (lambda session, path=path: upsert_recomputed(session, path, ("id",), affected, rows,
                                                                   "parallel-app", batch_id))
                for name, path in paths.items()}

    try:
        with commit_metadata(spark, {"batch_id": 7}):
            write_in_parallel(spark, merges(7))
            write_in_parallel(spark, merges(7))  # the same batch again: every table skips it
        jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(group)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)

    for path in paths.values():
        history = _history(spark, path)
        assert [h.operation for h in history] == ["WRITE", "MERGE"], history
        assert json.loads(history[-1].userMetadata) == {"batch_id": 7}
        back = spark.read.format("delta").load(path)
        assert sorted(tuple(r) for r in back.collect()) == [(1, "new"), (2, "added")]
    assert spark.conf.get(TXN_APP_ID, None) is None, "the caller's session took a write's transaction"
    assert spark.conf.get(USER_METADATA, None) is None
    assert jobs, "the writes' jobs ran outside the caller's job group"


def test_each_write_sees_only_the_settings_it_made(spark):
    both_set = threading.Barrier(2, timeout=60)

    def mark(value: str):
        def write(session) -> str:
            session.conf.set("spark.kappa.test.mark", value)
            both_set.wait()
            return session.conf.get("spark.kappa.test.mark")
        return write

    assert write_in_parallel(spark, {"x": mark("x"), "y": mark("y")}) == {"x": "x", "y": "y"}
    assert spark.conf.get("spark.kappa.test.mark", None) is None


def test_a_failed_write_fails_the_call_only_after_the_others_have_committed(spark, tmp_path):
    path = str(tmp_path / "slow")
    failed = threading.Event()

    def fail(_session) -> None:
        failed.set()
        raise ValueError("this write fails")

    def slow(session) -> None:
        failed.wait(timeout=60)
        session.createDataFrame([(1,)], "id INT").write.format("delta").save(path)

    with pytest.raises(ValueError, match="this write fails"):
        write_in_parallel(spark, {"fail": fail, "slow": slow})
    assert [h.operation for h in _history(spark, path)] == ["WRITE"]


def test_pieces_of_work_run_at_once_in_the_callers_job_group_and_return_by_name(spark):
    both_started = threading.Barrier(2, timeout=60)  # each piece waits for the other: run in turn, they would hang
    group = "test-in-parallel"
    spark.sparkContext.setJobGroup(group, "work at once")

    def count(n: int):
        def work() -> int:
            both_started.wait()
            return spark.range(n).count()
        return work

    try:
        assert in_parallel(spark, {"small": count(3), "large": count(5)}) == {"small": 3, "large": 5}
        jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(group)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert len(jobs) >= 2, "the pieces' jobs ran outside the caller's job group"
