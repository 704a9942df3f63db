"""A stream's MERGE target rewrites files while small and marks rows with deletion vectors once large."""

import uuid
from pathlib import Path

from delta.tables import DeltaTable

from spark_apps.io import delta_log
from spark_apps.io.delta_writes import DELETION_VECTORS, GOLD_TABLE_PROPERTIES, deletion_vectors_once_large

SCHEMA = "id string, amount long"


def small_table(spark, tmp_path) -> str:
    path = str(tmp_path / f"t-{uuid.uuid4().hex[:8]}")
    builder = DeltaTable.create(spark).location(path).addColumns(spark.createDataFrame([], SCHEMA).schema)
    for key, value in GOLD_TABLE_PROPERTIES.items():
        builder = builder.property(key, value)
    builder.execute()
    spark.createDataFrame([(f"k{i}", i) for i in range(50)], SCHEMA).coalesce(1).write.format("delta") \
        .mode("append").save(path)
    return path


def upsert(spark, path: str, ids: list[str]) -> dict[str, str]:
    """MERGE new amounts for ``ids``; the commit's operation metrics."""
    source = spark.createDataFrame([(i, 1000) for i in ids], SCHEMA)
    DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.id = s.id") \
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    return next(delta_log.commits(Path(path), limit=1)).metrics


def vectors_on(spark, path: str) -> str:
    return spark.sql(f"SHOW TBLPROPERTIES delta.`{path}` ('{DELETION_VECTORS}')").first().value


def test_a_small_merge_target_rewrites_the_files_it_touches_instead_of_marking_rows(spark, tmp_path):
    path = small_table(spark, tmp_path)
    assert not deletion_vectors_once_large(spark, path, min_bytes=10 ** 9)
    assert vectors_on(spark, path) == "false"
    metrics = upsert(spark, path, ["k1", "k2"])
    assert metrics["numTargetDeletionVectorsAdded"] == "0"
    assert int(metrics["numTargetRowsCopied"]) == 48, "the file's other rows are copied with the two updated"


def test_a_merge_target_that_reaches_the_size_marks_rows_from_then_on_and_keeps_them(spark, tmp_path):
    path = small_table(spark, tmp_path)
    protocol_before = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert deletion_vectors_once_large(spark, path, min_bytes=1)
    assert vectors_on(spark, path) == "true"
    after = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert (after.minReaderVersion, after.minWriterVersion) == (protocol_before.minReaderVersion,
                                                                protocol_before.minWriterVersion), \
        "the feature was supported from the start: turning it on upgrades no protocol"
    metrics = upsert(spark, path, ["k1", "k2"])
    assert int(metrics["numTargetDeletionVectorsAdded"]) >= 1
    assert metrics["numTargetRowsCopied"] == "0"
    assert not deletion_vectors_once_large(spark, path, min_bytes=1), "already on: nothing to commit"
    assert not deletion_vectors_once_large(spark, path, min_bytes=10 ** 9)
    assert vectors_on(spark, path) == "true", "never off again"


def test_the_size_comes_from_the_newest_readable_checksum_file(tmp_path):
    log = tmp_path / "_delta_log"
    log.mkdir()
    assert delta_log.newest_checksum(tmp_path) is None
    (log / f"{1:020d}.crc").write_text('{"tableSizeBytes": 10}')
    (log / f"{2:020d}.crc").write_text('{"tableSize')
    assert delta_log.newest_checksum(tmp_path) == {"tableSizeBytes": 10}, "a cut-short newest one is passed over"


def test_a_failed_switch_leaves_the_table_rewriting_files_and_is_said_in_the_log_not_raised(tmp_path, caplog):
    class RefusingSession:
        def sql(self, statement):
            raise RuntimeError(f"the metastore is gone while running {statement.split()[0]}")

    log = tmp_path / "_delta_log"
    log.mkdir()
    (log / f"{3:020d}.crc").write_text(
        '{"tableSizeBytes": 5000000, "metadata": {"configuration": {"delta.enableDeletionVectors": "false"}}}')
    assert not deletion_vectors_once_large(RefusingSession(), str(tmp_path), min_bytes=4_000_000)
    assert "stay off until the next stream start or maintenance: the metastore is gone" in caplog.text
