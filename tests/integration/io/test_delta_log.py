"""A Delta table's commits read from its commit files say what Delta's own history says, newest first; the statistics
of its live files read from its log say what Spark reads from those files."""

import json
import uuid
from pathlib import Path
from urllib.parse import unquote

import pytest
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from spark_apps.core.errors import PlatformError
from spark_apps.io import delta_log, delta_snapshot
from spark_apps.io.delta_writes import commit_metadata

pytestmark = pytest.mark.integration


@pytest.fixture
def table(spark, tmp_path):
    """A table with a creation, two tagged appends, an untagged MERGE and an OPTIMIZE: versions 0-4."""
    path = tmp_path / f"t-{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE TABLE delta.`{path}` (id string, n int) USING delta")
    for batch_id, rows in enumerate([[("a", 1), ("b", 2)], [("c", 3)]]):
        with commit_metadata(spark, {"app_id": "app", "batch_id": batch_id}):
            spark.createDataFrame(rows, "id string, n int").write.format("delta").mode("append").save(str(path))
    DeltaTable.forPath(spark, str(path)).alias("t").merge(
        spark.createDataFrame([("a", 10)], "id string, n int").alias("s"), "t.id = s.id") \
        .whenMatchedUpdateAll().execute()
    spark.sql(f"OPTIMIZE delta.`{path}`")
    return path


def test_the_commit_files_give_delta_historys_versions_operations_metadata_and_metrics(spark, table):
    history = DeltaTable.forPath(spark, str(table)).history() \
        .select("version", "operation", "userMetadata", "operationMetrics").collect()
    read = list(delta_log.commits(table))
    assert [(c.version, c.operation, c.user_metadata, c.metrics) for c in read] == [
        (h.version, h.operation, h.userMetadata, dict(h.operationMetrics or {})) for h in history]
    assert [c.version for c in read] == [4, 3, 2, 1, 0]
    assert [c.meta.get("batch_id") for c in read] == [None, None, 1, 0, None]
    assert delta_log.latest_version(table) == 4
    assert [c.version for c in delta_log.commits(table, limit=2)] == [4, 3]


def test_only_kept_commit_files_count_and_other_log_files_are_not_commits(table):
    log = table / "_delta_log"
    (log / f"{0:020d}.json").unlink()  # cleaned up by log retention
    (log / f".{5:020d}.json.{uuid.uuid4()}.tmp").write_text("{}")  # a commit being written
    (log / f"{4:020d}.checkpoint.parquet").write_bytes(b"")
    assert delta_log.commit_versions(table) == [4, 3, 2, 1]


def test_a_commit_info_after_other_actions_is_found_and_unparsable_metadata_is_no_batch(tmp_path):
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    actions = [{"protocol": {"minReaderVersion": 1}},
               {"commitInfo": {"operation": "WRITE", "userMetadata": "not json", "operationMetrics": {"n": 3}}}]
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    (commit,) = delta_log.commits(tmp_path / "t")
    assert (commit.version, commit.operation, commit.metrics, commit.meta) == (0, "WRITE", {"n": "3"}, {})


def test_a_folder_without_a_delta_log_is_one_readable_error(tmp_path):
    with pytest.raises(PlatformError, match="is not a Delta table"):
        delta_log.latest_version(tmp_path)


def test_a_table_is_there_only_when_its_log_holds_a_commit_or_a_checkpoint(tmp_path):
    table = tmp_path / "t"
    assert not delta_log.has_commits(table), "no folder"
    log = table / "_delta_log"
    log.mkdir(parents=True)
    assert not delta_log.has_commits(table), "a log a crashed create left empty"
    (log / f".{0:020d}.json.{uuid.uuid4()}.tmp").write_text("{}")
    assert not delta_log.has_commits(table), "a commit still being written"
    (log / f"{0:020d}.json").write_text("{}\n")
    assert delta_log.has_commits(table)
    (log / f"{0:020d}.json").unlink()
    (log / "_last_checkpoint").write_text("{}")
    assert delta_log.has_commits(table), "commits cleaned up behind a checkpoint"


def test_a_damaged_commit_file_is_one_line_naming_it(tmp_path):
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").write_text("not json\n")
    with pytest.raises(PlatformError, match=r"00000000000000000000\.json line 1 is not a Delta action") as raised:
        list(delta_log.commits(tmp_path / "t"))
    assert "\n" not in str(raised.value)


def test_the_stream_position_passes_over_a_commit_another_writer_tagged_with_a_batch_id(tmp_path):
    from spark_apps.io.lineage import position_at

    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    stream = {"app_id": "app", "batch_id": 3, "topic": "events", "stream_start_offsets": {"0": 0},
              "end_offsets": {"0": 12}}
    for version, meta in enumerate([stream, {"batch_id": 1}]):
        (log / f"{version:020d}.json").write_text(
            json.dumps({"commitInfo": {"operation": "WRITE", "userMetadata": json.dumps(meta)}}) + "\n")
    position = position_at(tmp_path / "t")
    assert (position.table_version, position.app_id, position.batch_id, position.end_offsets) == (1, "app", 3, {0: 12})


def test_the_snapshot_read_without_a_jvm_equals_sparks_after_a_checkpoint_an_optimize_and_a_new_column(
        spark, tmp_path):
    """Delta writes a checkpoint every tenth commit and OPTIMIZE retires files: the log replay must agree."""
    from spark_apps.io.delta_snapshot import read_table

    path = str(tmp_path / "appended")
    for n in range(12):
        frame = spark.createDataFrame([(f"r{n}", n)], "run_id string, n long")
        if n >= 6:
            frame = frame.selectExpr("*", "n % 2 = 0 AS even")
        frame.write.format("delta").mode("append").option("mergeSchema", "true").save(path)
        if n == 8:
            DeltaTable.forPath(spark, path).optimize().executeCompaction()
    assert any(p.name.endswith(".checkpoint.parquet") for p in (tmp_path / "appended" / "_delta_log").iterdir())
    expected = sorted(tuple(r) for r in spark.read.format("delta").load(path).select("run_id", "n", "even").collect())
    got = sorted(tuple(r.values()) for r in read_table(tmp_path / "appended", ["run_id", "n", "even"]).to_pylist())
    assert got == expected and len(got) == 12


def test_file_statistics_read_from_the_log_count_the_rows_spark_reads_from_each_file_across_a_checkpoint(
        spark, tmp_path):
    path = tmp_path / "partitioned"
    spark.sql(f"CREATE TABLE delta.`{path}` (n long, part string) USING delta PARTITIONED BY (part) "
              "TBLPROPERTIES ('delta.checkpointInterval' = '3')")
    for i in range(5):
        spark.range(i * 10, i * 10 + 7).selectExpr("id AS n", f"'p{i % 2}' AS part") \
            .write.format("delta").mode("append").save(str(path))
    spark.sql(f"DELETE FROM delta.`{path}` WHERE n IN (1, 2, 41)")
    version = delta_log.latest_version(path)
    assert list((path / "_delta_log").glob("*.checkpoint.parquet")), "a checkpoint stands for the first commits"
    read = {(Path(r["file"]).name, r["part"]): (r["rows"], r["largest"]) for r in spark.read.format("delta")
            .load(str(path)).groupBy(F.col("_metadata.file_path").alias("file"), "part")
            .agg(F.count("*").alias("rows"), F.max("n").alias("largest")).collect()}
    logged = {(Path(unquote(f.path)).name, f.partition["part"]): (f.records, f.max_values["n"])
              for f in delta_snapshot.file_stats(path, version)}
    assert logged == read
