"""The rows a Delta table's commits wrote after a version: what an incremental audit compares on the stream side."""

import uuid
from pathlib import Path

import pytest

from spark_apps.io.delta_changes import HistoryGone, rows_added

pytestmark = pytest.mark.integration

SCHEMA = "id string, amount long"


def ids(frame) -> set[str]:
    return {r.id for r in frame.collect()}


def test_rows_added_after_a_version_are_the_inserted_and_rewritten_rows_only(spark, tmp_path):
    path = tmp_path / f"t-{uuid.uuid4().hex[:8]}"
    spark.createDataFrame([("a", 1), ("b", 2), ("c", 3)], SCHEMA).write.format("delta").save(str(path))
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.createDataFrame([("d", 4)], SCHEMA).write.format("delta").mode("append").save(str(path))
    spark.sql(f"UPDATE delta.`{path}` SET amount = 20 WHERE id = 'b'")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 'c'")
    latest = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").first().version
    assert ids(rows_added(spark, path, 1, latest)) == {"d", "b"}, "a, untouched, and c, only deleted, are not"
    assert ids(rows_added(spark, path, latest, latest)) == set()


def test_a_file_a_merge_only_marked_rows_of_brings_none_of_its_other_rows(spark, tmp_path):
    path = tmp_path / f"t-{uuid.uuid4().hex[:8]}"
    spark.createDataFrame([("a", 1), ("b", 2), ("c", 3)], SCHEMA).coalesce(1).write.format("delta") \
        .option("delta.enableDeletionVectors", "true").save(str(path))
    spark.sql(f"MERGE INTO delta.`{path}` t USING (SELECT 'b' AS id, 20L AS amount) s ON t.id = s.id "
              "WHEN MATCHED THEN UPDATE SET *")
    assert ids(rows_added(spark, path, 0, 1)) == {"b"}, "the one file, re-added with b marked, brings not a or c"


def test_a_cleaned_up_commit_says_the_changes_are_unknown(spark, tmp_path):
    path = tmp_path / f"t-{uuid.uuid4().hex[:8]}"
    spark.createDataFrame([("a", 1)], SCHEMA).write.format("delta").save(str(path))
    spark.createDataFrame([("b", 2)], SCHEMA).write.format("delta").mode("append").save(str(path))
    (Path(path) / "_delta_log" / f"{1:020d}.json").rename(Path(path) / "moved.json")
    with pytest.raises(HistoryGone, match="log retention"):
        rows_added(spark, path, 0, 1)


def test_only_the_files_added_and_still_held_are_opened(spark, tmp_path):
    """A micro-batch asks for the rows of its own commit: reading them must not open the table's other files (here
    gone from disk), nor a file compacted away within the range (gone too, as after a VACUUM)."""
    path = tmp_path / f"t-{uuid.uuid4().hex[:8]}"
    for row in [("a", 1), ("b", 2), ("c", 3)]:
        spark.createDataFrame([row], SCHEMA).coalesce(1).write.format("delta").mode("append").save(str(path))
    appended = {f.name for f in path.glob("*.parquet")}
    spark.sql(f"OPTIMIZE delta.`{path}`")
    for name in appended:
        (path / name).unlink()
    assert ids(rows_added(spark, path, 0, 3)) == {"a", "b", "c"}, "the compacted file, not the two it replaced"
    compacted = {f.name for f in path.glob("*.parquet")}
    spark.createDataFrame([("d", 4)], SCHEMA).coalesce(1).write.format("delta").mode("append").save(str(path))
    for name in compacted:
        (path / name).unlink()
    assert ids(rows_added(spark, path, 3, 4)) == {"d"}


def test_a_rearrangement_within_the_range_adds_no_rows_while_the_files_it_replaced_are_on_disk(spark, tmp_path):
    """OPTIMIZE (or the store's compaction) changes no data: the rows the range wrote are read from the files it
    replaced, not from its files, which hold every older row too."""
    path = tmp_path / f"t-{uuid.uuid4().hex[:8]}"
    for row in [("a", 1), ("b", 2), ("c", 3)]:
        spark.createDataFrame([row], SCHEMA).coalesce(1).write.format("delta").mode("append").save(str(path))
    spark.sql(f"OPTIMIZE delta.`{path}`")
    assert ids(rows_added(spark, path, 1, 3)) == {"c"}
