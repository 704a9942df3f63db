"""The stream's MERGE of recomputed rows, with its keys fixed in the driver (small batch) or checkpointed (large)."""

import datetime as dt
import random
import uuid
from pathlib import Path
from urllib.parse import urlparse

import pytest
from pyspark.testing import assertDataFrameEqual

from spark_apps.core.settings import Settings
from spark_apps.io.delta_writes import (
    MERGE_TARGET_PROPERTIES,
    merge_source,
    upsert_gold_keys,
    upsert_recomputed,
)
from spark_apps.io.key_sets import fixed_changes, key_set, key_spans
from spark_apps.marketplace.pipeline import CUSTOMER_SESSIONS, MERCHANT_REVENUE, ORDER_STATUS, SESSION_GAP_S
from spark_apps.pipeline.declaration import SPAN_HI, SPAN_LO
from spark_apps.transforms.events import gold_changes
from spark_apps.transforms.store import gold_rows

pytestmark = pytest.mark.integration

T0 = dt.datetime(2026, 11, 25, 10, 0, 0)
SCHEMA = "customer string, session_start timestamp, events long"
EVENTS = ("event_id string, event_type string, event_time timestamp, order_id string, customer_id string, "
          "merchant_id string, amount_cents long, currency string")


@pytest.fixture
def table(spark, tmp_path):
    path = str(tmp_path / f"gold-{uuid.uuid4().hex[:8]}")
    rows = [("a", T0, 1), ("a", T0 + dt.timedelta(hours=1), 2), ("b", T0, 3), ("c", T0, 4)]
    spark.createDataFrame(rows, SCHEMA).write.format("delta").save(path)
    return path


@pytest.mark.parametrize("in_driver", [True, False], ids=["keys-in-driver", "keys-checkpointed"])
def test_only_the_affected_keys_change_and_their_vanished_rows_are_deleted(spark, table, in_driver):
    affected = key_set(spark.createDataFrame([("a",), ("b",), ("d",)], "customer string"), ("customer",), in_driver)
    recomputed = spark.createDataFrame([("a", T0, 5), ("d", T0, 6)], SCHEMA)
    upsert_recomputed(spark, table, ("customer", "session_start"), affected, recomputed, "app", 0)
    # a's second session and all of b are gone, a's first is updated, d is new, c (not affected) is untouched.
    assertDataFrameEqual(spark.read.format("delta").load(table),
                         spark.createDataFrame([("a", T0, 5), ("c", T0, 4), ("d", T0, 6)], SCHEMA))


@pytest.mark.parametrize("in_driver", [True, False], ids=["keys-in-driver", "keys-checkpointed"])
def test_a_table_keyed_by_its_recompute_key_deletes_a_key_that_has_no_recomputed_row(spark, tmp_path, in_driver):
    path = str(tmp_path / "orders")
    spark.createDataFrame([("o1", "placed"), ("o2", "paid")], "order_id string, status string") \
        .write.format("delta").save(path)
    affected = key_set(spark.createDataFrame([("o1",), ("o3",)], "order_id string"), ("order_id",), in_driver)
    recomputed = spark.createDataFrame([("o3", "placed")], "order_id string, status string")
    upsert_recomputed(spark, path, ("order_id",), affected, recomputed, "app", 0)
    assertDataFrameEqual(spark.read.format("delta").load(path),
                         spark.createDataFrame([("o2", "paid"), ("o3", "placed")], "order_id string, status string"))


def test_a_replayed_batch_changes_nothing(spark, table):
    affected = key_set(spark.createDataFrame([("c",)], "customer string"), ("customer",), True)
    upsert_recomputed(spark, table, ("customer", "session_start"), affected,
                      spark.createDataFrame([("c", T0, 40)], SCHEMA), "app", 7)
    upsert_recomputed(spark, table, ("customer", "session_start"), affected,
                      spark.createDataFrame([("c", T0, 400)], SCHEMA), "app", 7)
    assert spark.read.format("delta").load(table).where("customer = 'c'").first()["events"] == 40


def test_a_merge_target_rewrites_only_the_rows_of_the_affected_keys(spark, tmp_path):
    path = str(tmp_path / "orders")
    rows = [(f"o{i:03d}", "placed") for i in range(200)]
    spark.createDataFrame(rows, "order_id string, status string").coalesce(1).write.format("delta") \
        .options(**MERGE_TARGET_PROPERTIES).save(path)
    affected = key_set(spark.createDataFrame([("o007",)], "order_id string"), ("order_id",), True)
    upsert_recomputed(spark, path, ("order_id",), affected,
                      spark.createDataFrame([("o007", "paid")], "order_id string, status string"), "app", 0)
    metrics = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").first().operationMetrics
    assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsCopied"]) == ("1", "0"), \
        "the other 199 rows of the file stay where they are, marked around"
    assert spark.read.format("delta").load(path).where("status = 'paid'").count() == 1


def test_keys_fixed_in_the_driver_keep_their_exact_types_and_range(spark):
    keys = spark.createDataFrame([("m1", T0), ("m2", T0 + dt.timedelta(minutes=5))], "merchant string, w timestamp")
    in_driver, checkpointed = key_set(keys, ("merchant", "w"), True), key_set(keys, ("merchant", "w"), False)
    assert in_driver.prune == checkpointed.prune
    assert "BETWEEN CAST('m1' AS string) AND CAST('m2' AS string)" in in_driver.prune
    assert in_driver.frame.schema == keys.schema
    assertDataFrameEqual(in_driver.frame, keys)
    empty = key_set(keys.where("false"), ("merchant", "w"), True)
    assert empty.prune == " AND false" and empty.frame.count() == 0


def test_the_merge_source_computes_the_recomputed_rows_once(spark, tmp_path):
    """The recomputed rows are a gold computation over silver: every read of them in the source is another scan of
    silver (and another Spark job) per gold table and micro-batch."""
    spark.createDataFrame([("a", T0, 5), ("d", T0, 6)], SCHEMA).write.parquet(str(tmp_path / "recomputed"))
    recomputed = spark.read.parquet(str(tmp_path / "recomputed"))
    gone = spark.createDataFrame([("a", T0), ("b", T0)], "customer string, session_start timestamp")
    source = merge_source(recomputed, gone, ("customer", "session_start"))
    plan = source._jdf.queryExecution().optimizedPlan().toString()
    assert plan.count("parquet") == 1, f"the source reads the recomputed rows more than once:\n{plan}"
    assertDataFrameEqual(source.select("customer", "session_start", "events", "_delete"), spark.createDataFrame(
        [("a", T0, 5, False), ("b", T0, None, True), ("d", T0, 6, False)],
        "customer string, session_start timestamp, events long, _delete boolean"))


def test_recomputing_only_the_sessions_near_changed_events_gives_what_recomputing_every_session_gives(spark,
                                                                                                        tmp_path):
    """Random events added and removed over several rounds: sessions merge, grow, split and vanish. After each
    round the table, updated by session spans alone, equals the sessions of all the events computed whole."""
    rng = random.Random(20261129)
    settings = Settings()
    gold = CUSTOMER_SESSIONS
    path = str(tmp_path / "sessions")

    def event(n: int) -> tuple:
        return (f"e{n}", rng.choice(["order_placed", "payment_captured", "order_refunded"]),
                T0 + dt.timedelta(seconds=rng.randrange(0, 6 * SESSION_GAP_S)), f"o{n}", rng.choice(["c1", "c2", "c3"]),
                "m1", 100, "EUR")

    def frame(rows):
        return spark.createDataFrame(rows, EVENTS)

    def whole(rows):
        return gold.compute(gold.key_rows(frame(rows), settings), settings)

    events = [event(n) for n in range(12)]
    whole(events).write.format("delta").options(**MERGE_TARGET_PROPERTIES).save(path)
    for round_ in range(5):
        removed = rng.sample(events, 2)
        added = [event(100 * (round_ + 1) + n) for n in range(4)]
        events = [e for e in events if e not in removed] + added
        changes = gold_changes(gold, frame(added + removed), lambda: spark.read.format("delta").load(path), settings)
        affected = fixed_changes(gold, changes, in_driver=round_ % 2 == 0)
        upsert_gold_keys(spark, path, gold, frame(events), affected, settings, "app", round_)
        assertDataFrameEqual(spark.read.format("delta").load(path), whole(events))


def test_a_session_span_set_bounds_the_merge_to_its_keys_and_times(spark):
    spans = spark.createDataFrame([("c1", T0, T0 + dt.timedelta(minutes=5)), ("c2", T0, T0)],
                                  f"customer_id string, {SPAN_LO} timestamp, {SPAN_HI} timestamp")
    in_driver = key_spans(spans, ("customer_id",), "session_start", True)
    checkpointed = key_spans(spans, ("customer_id",), "session_start", False)
    assert in_driver.prune == checkpointed.prune == (
        " AND t.`customer_id` BETWEEN CAST('c1' AS string) AND CAST('c2' AS string)"
        " AND t.`session_start` BETWEEN CAST('2026-11-25 10:00:00' AS timestamp)"
        " AND CAST('2026-11-25 10:05:00' AS timestamp)")
    empty = key_spans(spans.where("false"), ("customer_id",), "session_start", True)
    assert empty.prune == " AND false" and empty.rows_of(spans).count() == 0


def _gold_after_a_batch_without_the_oldest_silver_file(spark, tmp_path, gold, old, kept, batch):
    """Silver written as one file per group (``old``, then ``kept``, then the ``batch``), the gold table computed whole
    before the batch; then the file of ``old`` is deleted from disk and the batch upserted. Any read of that file
    fails, so the upsert succeeds only if it skips it. Returns the gold table and what computing it whole gives."""
    settings = Settings()
    silver, target = str(tmp_path / "silver"), str(tmp_path / gold.name)

    def whole(rows):
        return gold_rows(gold, spark.createDataFrame(rows, EVENTS), settings)

    for rows in (old, kept, batch):
        spark.createDataFrame(rows, EVENTS).coalesce(1).write.format("delta").mode("append").save(silver)
    whole(old + kept).write.format("delta").options(**MERGE_TARGET_PROPERTIES).save(target)
    old_file = (spark.read.format("delta").load(silver).where(f"event_id = '{old[0][0]}'")
                .select("_metadata.file_path").first()[0])
    Path(urlparse(old_file).path).unlink()
    batch_frame = spark.createDataFrame(batch, EVENTS)
    changes = gold_changes(gold, batch_frame, lambda: spark.read.format("delta").load(target), settings)
    affected = fixed_changes(gold, changes, in_driver=True)
    upsert_gold_keys(spark, target, gold, spark.read.format("delta").load(silver), affected, settings, "app", 0)
    return spark.read.format("delta").load(target), whole(old + kept + batch)


def _event(n: int, at: dt.datetime, order: str, event_type: str = "order_placed", merchant: str = "m1") -> tuple:
    return (f"e{n}", event_type, at, order, f"c{n % 3}", merchant, 100 * n, "EUR")


def test_a_gold_read_of_touched_windows_never_opens_the_silver_files_outside_them(spark, tmp_path):
    hour = dt.timedelta(hours=1)
    old = [_event(n, T0 + dt.timedelta(seconds=n), f"o{n}") for n in range(5)]
    kept = [_event(n, T0 + hour + dt.timedelta(seconds=n), f"o{n}") for n in range(5, 10)]
    batch = [_event(10, T0 + hour + dt.timedelta(seconds=30), "o10"),
             _event(11, T0 + hour + dt.timedelta(seconds=30), "o11", merchant="m2")]
    gold, expected = _gold_after_a_batch_without_the_oldest_silver_file(spark, tmp_path, MERCHANT_REVENUE, old,
                                                                        kept, batch)
    assertDataFrameEqual(gold.where(f"window_start >= '{T0 + hour}'"), expected.where(f"window_start >= '{T0 + hour}'"))
    assert gold.where(f"window_start < '{T0 + hour}'").count() == 1, "the old window's row is left as it was"


def test_a_gold_read_of_touched_keys_never_opens_the_silver_files_outside_their_range(spark, tmp_path):
    """Order ids grow with the log, so each silver file holds a narrow range of them."""
    old = [_event(n, T0 + dt.timedelta(seconds=n), f"o{n:03d}") for n in range(5)]
    kept = [_event(n, T0 + dt.timedelta(seconds=n), f"o{n:03d}") for n in range(100, 105)]
    batch = [_event(200, T0, "o101", "payment_captured"), _event(201, T0, "o104", "order_refunded")]
    gold, expected = _gold_after_a_batch_without_the_oldest_silver_file(spark, tmp_path, ORDER_STATUS, old, kept,
                                                                        batch)
    assertDataFrameEqual(gold.where("order_id >= 'o100'"), expected.where("order_id >= 'o100'"))
    assert gold.where("status = 'paid'").count() == 1 and gold.where("status = 'refunded'").count() == 1
