"""Writing only what differs into a snapshot: new keys appended, changed or vanished keys merged, the rest untouched."""

import datetime as dt
import uuid

from pyspark.testing import assertDataFrameEqual

from spark_apps.io.delta_writes import write_changes

T0 = dt.datetime(2026, 11, 25, 10, 0, 0)
SCHEMA = "customer string, session_start timestamp, events long"
KEYS = ("customer", "session_start")


def operations(spark, path: str) -> list[str]:
    return [r.operation for r in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()]


def test_rows_of_new_keys_are_appended_without_a_merge(spark, tmp_path):
    path = str(tmp_path / f"gold-{uuid.uuid4().hex[:8]}")
    spark.createDataFrame([("a", T0, 1), ("b", T0, 2)], SCHEMA).write.format("delta").save(path)
    before = spark.read.format("delta").load(path).where("customer = 'a'")
    after = spark.createDataFrame([("a", T0, 1), ("c", T0, 3)], SCHEMA)
    write_changes(spark, path, KEYS, before, after, "run")
    assertDataFrameEqual(spark.read.format("delta").load(path),
                         spark.createDataFrame([("a", T0, 1), ("b", T0, 2), ("c", T0, 3)], SCHEMA))
    assert operations(spark, path) == ["WRITE", "WRITE"], "a is unchanged and c is new: nothing to merge"


def test_changed_and_vanished_rows_of_the_keys_are_merged(spark, tmp_path):
    path = str(tmp_path / f"gold-{uuid.uuid4().hex[:8]}")
    rows = [("a", T0, 1), ("a", T0 + dt.timedelta(hours=1), 2), ("b", T0, 3), ("z", T0, 9)]
    spark.createDataFrame(rows, SCHEMA).write.format("delta").save(path)
    before = spark.read.format("delta").load(path).where("customer IN ('a', 'b')")
    after = spark.createDataFrame([("a", T0, 5), ("b", T0, 3), ("d", T0, 6)], SCHEMA)
    write_changes(spark, path, KEYS, before, after, "run")
    # a's first session changed, its second vanished, b is unchanged, d is new, z was never among the keys.
    assertDataFrameEqual(spark.read.format("delta").load(path),
                         spark.createDataFrame([("a", T0, 5), ("b", T0, 3), ("d", T0, 6), ("z", T0, 9)], SCHEMA))
    merge = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").first()
    assert merge.operation == "MERGE"
    assert (int(merge.operationMetrics["numTargetRowsUpdated"]),
            int(merge.operationMetrics["numTargetRowsDeleted"])) == (1, 1)


def test_a_retried_write_changes_nothing_more(spark, tmp_path):
    path = str(tmp_path / f"gold-{uuid.uuid4().hex[:8]}")
    spark.createDataFrame([("a", T0, 1)], SCHEMA).write.format("delta").save(path)
    before = spark.read.format("delta").load(path).localCheckpoint(eager=True)
    after = spark.createDataFrame([("a", T0, 2), ("b", T0, 3)], SCHEMA)
    write_changes(spark, path, KEYS, before, after, "run")
    versions = len(operations(spark, path))
    write_changes(spark, path, KEYS, before, after, "run")
    assert len(operations(spark, path)) == versions
    assertDataFrameEqual(spark.read.format("delta").load(path),
                         spark.createDataFrame([("a", T0, 2), ("b", T0, 3)], SCHEMA))
