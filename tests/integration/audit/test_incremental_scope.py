"""What an incremental audit compares of a table: the rows of its scope's keys, read without the files outside them."""

from pathlib import Path
from urllib.parse import urlparse

import pytest

from spark_apps.audit.incremental import Scope, _widened, restrict

pytestmark = pytest.mark.integration


def test_an_incremental_comparison_by_key_never_opens_the_files_outside_the_keys_range(spark, tmp_path):
    """Event ids that grow with the log (a sequence, a ULID) put each file of a table in a narrow range of them: the
    scope's range skips the older files, so the comparison reads the new rows, not the whole table."""
    path = str(tmp_path / "events")
    for ids in (["ev-a-001", "ev-a-002"], ["ev-a-101", "ev-a-102", "ev-a-103"]):
        spark.createDataFrame([(i, len(i)) for i in ids], "event_id string, n int").coalesce(1) \
            .write.format("delta").mode("append").save(path)
    old_file = spark.read.format("delta").load(path).where("event_id = 'ev-a-001'") \
        .select("_metadata.file_path").first()[0]
    Path(urlparse(old_file).path).unlink()
    new_records = Scope(("event_id",), spark.createDataFrame([("ev-a-102",), ("ev-a-999",)], "event_id string"))
    scope = _widened(new_records, [spark.createDataFrame([("ev-a-101",), (None,)], "event_id string")])
    assert not scope.empty and "ev-a-101" in scope.bounds and "ev-a-999" in scope.bounds
    compared = restrict(spark.read.format("delta").load(path), scope)
    assert sorted(r.event_id for r in compared.collect()) == ["ev-a-101", "ev-a-102"]


def test_a_scope_without_keys_is_empty_and_matches_no_row(spark):
    scope = _widened(Scope(("event_id",), spark.createDataFrame([], "event_id string")), [])
    assert scope.empty
    assert restrict(spark.createDataFrame([("ev-a-001",)], "event_id string"), scope).isEmpty()
