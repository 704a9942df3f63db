"""The exact diff on small frames: every kind of difference is found and classified, and nothing else."""

from __future__ import annotations

import datetime as dt

import pytest

from spark_apps.audit.diff import EXTRA, MISMATCH, MISSING, bucket_sql, diff_table

pytestmark = pytest.mark.integration

SCHEMA = "merchant_id string, window_start timestamp, net_cents long"
W0, W1 = dt.datetime(2026, 1, 1, 0, 0), dt.datetime(2026, 1, 1, 0, 1)
BATCH = [("m1", W0, 100), ("m2", W0, 200), ("m1", W1, 300), ("m3", W1, 400)]
KEYS = ("merchant_id", "window_start")


def compare(spark, stream_rows, batch_rows=BATCH, schema=SCHEMA, batch_schema=SCHEMA):
    return diff_table("gold.t", spark.createDataFrame(stream_rows, schema),
                      spark.createDataFrame(batch_rows, batch_schema), KEYS, buckets=8)


def test_equal_frames_match_without_a_row_level_diff(spark):
    diff = compare(spark, list(reversed(BATCH)))
    assert diff.exact and diff.matched == 4 and diff.differing_buckets == [] and diff.samples == {}
    assert [b.bucket for b in diff.buckets] == ["2026-01-01 00:00:00", "2026-01-01 00:01:00"], "one per window"


@pytest.mark.parametrize(("stream", "kind", "matched"), [
    (BATCH[:3], MISSING, 3),
    (BATCH + [("m4", W1, 1)], EXTRA, 4),
    (BATCH + [BATCH[0]], EXTRA, 3),
    ([("m1", W0, 101)] + BATCH[1:], MISMATCH, 3),
], ids=["deleted row", "extra row", "duplicated row", "changed value"])
def test_each_difference_is_classified_by_key(spark, stream, kind, matched):
    diff = compare(spark, stream)
    assert not diff.exact
    assert diff.counts == {MISSING: 0, EXTRA: 0, MISMATCH: 0} | {kind: 1}
    assert len(diff.samples[kind]) == 1
    assert diff.matched == matched, "the other keys still count as matched"


def test_only_the_differing_window_is_compared_row_by_row(spark):
    diff = compare(spark, [("m1", W0, 100), ("m2", W0, 200), ("m1", W1, 301), ("m3", W1, 400)])
    assert diff.differing_buckets == ["2026-01-01 00:01:00"]
    sample = diff.samples[MISMATCH][0]
    assert sample["key"]["merchant_id"] == "m1" and '"net_cents":301' in sample["stream"][0]
    assert '"net_cents":300' in sample["batch"][0]


def test_a_schema_difference_fails_and_names_the_column(spark):
    diff = compare(spark, BATCH, schema="merchant_id string, window_start timestamp, net_cents int")
    assert not diff.exact and diff.schema_problem == "schemas differ: net_cents is int in stream, bigint in batch"


def test_tables_without_a_window_are_bucketed_by_key_hash():
    assert bucket_sql(["order_id", "status"], ("order_id",), 16) == "CAST(pmod(xxhash64(`order_id`), 16) AS STRING)"
