"""The newest snapshot of a small Delta table read from its log and files without a JVM, on logs written by hand:
what it reads, and what it leaves to Spark."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_apps.core.settings import Settings
from spark_apps.io import delta_snapshot
from spark_apps.io.catalog import table_path
from spark_apps.io.delta_snapshot import FileStats, Unreadable, file_stats, live_files, read_table

PROTOCOL = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
META = {"metaData": {"id": "t", "format": {"provider": "parquet"}, "schemaString": "{}", "partitionColumns": [],
                     "configuration": {"delta.appendOnly": "true"}}}


def commit(table: Path, version: int, *actions: dict) -> None:
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in [{"commitInfo": {}}, *actions]))


def data(table: Path, name: str, **columns) -> dict:
    pq.write_table(pa.table(columns), table / name)
    return {"add": {"path": name.replace(" ", "%20"), "size": 1, "modificationTime": 0, "dataChange": True}}


def test_live_files_are_the_adds_not_removed_since_and_a_column_added_later_is_null_in_older_rows(tmp_path):
    first = data(tmp_path, "part 0.parquet", run_id=["r1"])
    commit(tmp_path, 0, PROTOCOL, META, first)
    commit(tmp_path, 1, data(tmp_path, "part-1.parquet", run_id=["r2"], success=[True]))
    commit(tmp_path, 2, data(tmp_path, "part-2.parquet", run_id=["r3"], success=[False]),
           {"remove": {"path": first["add"]["path"], "dataChange": True}})
    assert [p.name for p in live_files(tmp_path)] == ["part-1.parquet", "part-2.parquet"]
    assert read_table(tmp_path, ["run_id", "success", "absent"]).to_pylist() == [
        {"run_id": "r2", "success": True, "absent": None}, {"run_id": "r3", "success": False, "absent": None}]


def test_the_newest_whole_checkpoint_stands_for_every_commit_before_it(tmp_path):
    kept = data(tmp_path, "kept.parquet", run_id=["r1"])
    actions = [PROTOCOL, META, kept]
    rows = {"add": [a.get("add") for a in actions], "metaData": [a.get("metaData") for a in actions],
            "protocol": [a.get("protocol") for a in actions]}
    (tmp_path / "_delta_log").mkdir()
    pq.write_table(pa.table(rows), tmp_path / "_delta_log" / f"{4:020d}.checkpoint.parquet")
    commit(tmp_path, 5, data(tmp_path, "new.parquet", run_id=["r2"]))
    assert sorted(r["run_id"] for r in read_table(tmp_path, ["run_id"]).to_pylist()) == ["r1", "r2"]
    (tmp_path / "_delta_log" / f"{5:020d}.json").unlink()
    commit(tmp_path, 6, data(tmp_path, "newer.parquet", run_id=["r3"]))
    with pytest.raises(Unreadable, match="not all there"):
        live_files(tmp_path)


def stats_add(path: str, epoch: str, records: int, batch: int, **extra) -> dict:
    return {"add": {"path": path, "partitionValues": {"_epoch": epoch}, "size": 1, "modificationTime": 0,
                    "dataChange": True, "stats": json.dumps({"numRecords": records, "maxValues": {"_batch": batch}}),
                    **extra}}


def test_file_statistics_at_a_version_come_from_the_checkpoint_and_the_commits_up_to_it(tmp_path):
    old, kept = stats_add("old.parquet", "0", 10, 1), stats_add("kept.parquet", "0", 20, 2)
    add = pa.struct([("path", pa.string()), ("partitionValues", pa.map_(pa.string(), pa.string())),
                     ("size", pa.int64()), ("modificationTime", pa.int64()), ("dataChange", pa.bool_()),
                     ("stats", pa.string())])
    schema = pa.schema([("add", add),
                        ("metaData", pa.struct([("id", pa.string()), ("partitionColumns", pa.list_(pa.string()))])),
                        ("protocol", pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32())]))])
    rows = {"add": [None, None, {**kept["add"], "partitionValues": [("_epoch", "0")]}],
            "metaData": [None, {"id": "t", "partitionColumns": ["_epoch"]}, None],
            "protocol": [PROTOCOL["protocol"], None, None]}
    (tmp_path / "_delta_log").mkdir()
    pq.write_table(pa.Table.from_pydict(rows, schema), tmp_path / "_delta_log" / f"{4:020d}.checkpoint.parquet")
    commit(tmp_path, 5, stats_add("new.parquet", "1", 30, 3,
                                  deletionVector={"storageType": "u", "pathOrInlineDv": "x", "cardinality": 4}))
    commit(tmp_path, 6, {"remove": {"path": "kept.parquet", "dataChange": False}}, old)
    assert file_stats(tmp_path, 5) == [FileStats("kept.parquet", {"_epoch": "0"}, 20, {"_batch": 2}),
                                       FileStats("new.parquet", {"_epoch": "1"}, 26, {"_batch": 3})]
    assert [f.path for f in file_stats(tmp_path, 6)] == ["new.parquet", "old.parquet"]
    with pytest.raises(Unreadable, match="not all there"):
        file_stats(tmp_path, 7)


def test_a_file_without_statistics_is_left_to_spark(tmp_path):
    commit(tmp_path, 0, PROTOCOL, META, {"add": {"path": "x.parquet", "size": 1, "modificationTime": 0,
                                                 "dataChange": True}})
    with pytest.raises(Unreadable, match="no statistics"):
        file_stats(tmp_path, 0)


@pytest.mark.parametrize("action", [
    {"add": {"path": "x.parquet", "deletionVector": {"storageType": "u", "cardinality": 1}}},
    {"metaData": {**META["metaData"], "configuration": {"delta.columnMapping.mode": "name"}}},
    {"metaData": {**META["metaData"], "partitionColumns": ["day"]}},
    {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["v2Checkpoint"]}},
])
def test_what_a_plain_parquet_reader_would_get_wrong_is_left_to_spark(tmp_path, action):
    commit(tmp_path, 0, PROTOCOL, META, action)
    with pytest.raises(Unreadable):
        live_files(tmp_path)


def test_rows_fall_back_to_spark_for_a_table_it_cannot_read_and_give_times_as_spark_does(tmp_path):
    settings = Settings(home=tmp_path)
    table = table_path(settings, "audit.reconciliation_ledger")
    table.mkdir(parents=True)
    commit(table, 0, PROTOCOL, META, data(table, "a.parquet", run_id=["r1"],
                                          finished_at=pa.array([0], pa.timestamp("us", tz="UTC")),
                                          started_at=pa.array([1_000_000_000], pa.timestamp("ns"))))
    found = delta_snapshot.rows(settings, "audit.reconciliation_ledger", ["run_id", "finished_at", "started_at"],
                                spark=lambda: pytest.fail("no Spark for a plain table"))
    utc = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    assert found == [{"run_id": "r1", "finished_at": utc.astimezone().replace(tzinfo=None),
                      "started_at": (utc + dt.timedelta(seconds=1)).astimezone().replace(tzinfo=None)}], \
        "naive and local as Spark gives them, whether stored with a zone or as INT96 nanoseconds"
    commit(table, 1, {"add": {"path": "a.parquet", "deletionVector": {"storageType": "u"}}})
    asked = []

    class Spark:
        @property
        def read(self):
            asked.append("spark")
            raise RuntimeError("stands for Spark's reader")

    with pytest.raises(RuntimeError, match="Spark's reader"):
        delta_snapshot.rows(settings, "audit.reconciliation_ledger", ["run_id"], spark=Spark)
    assert asked == ["spark"]
