"""The stream's store: gold rows folded from the partial rows of any split of the events, resets, and the views
of records (winners displaced later no longer count), on small hand-made frames."""

import datetime as dt
import random

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from spark_apps.core.settings import Settings
from spark_apps.io.stream_store import layout
from spark_apps.marketplace.pipeline import CUSTOMER_SESSIONS, MERCHANT_REVENUE, ORDER_STATUS, PIPELINE
from spark_apps.pipeline.folds import BATCH, EMPTY, RESET, compacted_query, fold_query
from spark_apps.transforms.store import (
    DISPLACED,
    KIND,
    RECORD,
    bronze_query,
    events_query,
    gold_rows,
    gold_rows_query,
    stored_gold_rows,
)

pytestmark = pytest.mark.integration

T0 = dt.datetime(2026, 11, 21, 10, 0, 0)
EVENTS = ("event_id string, event_type string, event_time timestamp, order_id string, customer_id string, "
          "merchant_id string, amount_cents long, currency string")
TYPES = ("order_placed", "payment_captured", "order_refunded")


def random_events(seed: int, n: int) -> list[tuple]:
    """Orders, payments and refunds of few orders, customers and merchants, at clustered and spread times with ties,
    so folds meet repeated keys, equal times, orphans and sessions that merge and stay apart."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        at = T0 + dt.timedelta(seconds=rng.choice([0, 1, 1, 30, 200, 299, 300, 301, 900, 1500]) + rng.random() * 60)
        rows.append((f"e{i:04d}", rng.choice(TYPES), at, f"o{rng.randrange(12)}", f"c{rng.randrange(4)}",
                     f"m{rng.randrange(3)}", rng.randrange(0, 1000), rng.choice(["EUR", "EUR", "USD"])))
    return rows


def stored(spark, gold, parts: list[list[tuple]], settings: Settings, resets=()):
    """The rows the stream would have written for these parts of the events, one batch each (a batch whose index is
    in ``resets`` writes a reset of its keys instead of partial rows), unprefixed as a gold view reads them."""
    frames = []
    for batch, rows in enumerate(parts):
        events = spark.createDataFrame(rows, EVENTS)
        written = stored_gold_rows(gold, gold.compute(gold.key_rows(events, settings), settings), batch,
                                   reset=batch in resets)
        frames.append(written)
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    columns = [c.split("__", 1)[1] for c in union.columns if c.startswith(f"{gold.name}__")]
    union.createOrReplaceTempView("_store")
    return spark.sql(gold_rows_query("_store", gold, columns)), columns


def folded_view(spark, gold, parts, settings, resets=()):
    rows, columns = stored(spark, gold, parts, settings, resets)
    return spark.sql(fold_query("{rows}", gold, columns), rows=rows)


def test_folding_the_partial_rows_of_any_split_of_the_events_gives_the_rows_of_all_of_them(spark):
    settings = Settings()
    for seed in range(3):
        events = random_events(seed, 120)
        rng = random.Random(seed)
        cuts = sorted(rng.sample(range(1, len(events)), 4))
        shuffled = events[:]
        rng.shuffle(shuffled)
        parts = [shuffled[a:b] for a, b in zip([0, *cuts], [*cuts, len(shuffled)], strict=True)]
        for gold in (MERCHANT_REVENUE, ORDER_STATUS, CUSTOMER_SESSIONS):
            whole = gold_rows(gold, spark.createDataFrame(events, EVENTS), settings)
            assertDataFrameEqual(folded_view(spark, gold, parts, settings), whole,
                                 checkRowOrder=False)


def test_a_reset_supersedes_every_earlier_row_of_its_key_and_later_partial_rows_fold_onto_it(spark):
    settings = Settings()
    at = lambda s: T0 + dt.timedelta(seconds=s)  # noqa: E731
    first = [("e1", "order_placed", at(1), "o1", "c1", "m1", 500, "EUR")]
    reset = [("e2", "order_placed", at(2), "o1", "c1", "m1", 700, "EUR")]
    after = [("e3", "payment_captured", at(3), "o1", "c1", "m1", 700, "EUR")]
    result = folded_view(spark, ORDER_STATUS, [first, reset, after], settings, resets={1})
    assert [(r.order_amount_cents, r.paid_cents, r.status) for r in result.collect()] == [(700, 700, "paid")]


def test_an_empty_reset_leaves_its_key_without_rows_until_a_later_batch_brings_some(spark):
    settings = Settings()
    at = lambda s: T0 + dt.timedelta(seconds=s)  # noqa: E731
    rows, columns = stored(spark, ORDER_STATUS, [[("e1", "order_placed", at(1), "o1", "c1", "m1", 500, "EUR")]],
                           settings)
    empty = spark.createDataFrame([("o1", 1, True, True)], f"order_id string, {BATCH} long, {RESET} boolean, "
                                                            f"{EMPTY} boolean")
    gone = rows.unionByName(empty, allowMissingColumns=True)
    assert spark.sql(fold_query("{rows}", ORDER_STATUS, columns), rows=gone).count() == 0
    later = rows.withColumn(BATCH, F.lit(2).cast("long"))
    again = gone.unionByName(later)
    assert spark.sql(fold_query("{rows}", ORDER_STATUS, columns), rows=again).count() == 1


def test_a_segment_that_left_a_key_without_rows_keeps_it_empty_over_the_older_rows(spark):
    settings = Settings()
    at = lambda s: T0 + dt.timedelta(seconds=s)  # noqa: E731
    rows, columns = stored(spark, ORDER_STATUS, [[("e1", "order_placed", at(1), "o1", "c1", "m1", 500, "EUR")],
                                                 [("e2", "order_placed", at(2), "o2", "c1", "m1", 700, "EUR")]],
                           settings)
    empty = spark.createDataFrame([("o1", 1, True, True)], f"order_id string, {BATCH} long, {RESET} boolean, "
                                                            f"{EMPTY} boolean")
    rows = rows.unionByName(empty, allowMissingColumns=True)
    kept = spark.sql(compacted_query("{rows}", ORDER_STATUS, columns, segment=True), rows=rows.where(f"{BATCH} = 1"))
    assert sorted((r.order_id, r[RESET], r[EMPTY]) for r in kept.collect()) == [("o1", True, True),
                                                                                   ("o2", False, False)]
    compacted = rows.where(f"{BATCH} = 0").unionByName(kept)
    assert [r.order_id for r in spark.sql(fold_query("{rows}", ORDER_STATUS, columns), rows=compacted).collect()] \
        == ["o2"]


def store_rows(spark, rows: list[dict]):
    """Rows of the marketplace's store (any column not given is null)."""
    schema = layout(spark, Settings(), PIPELINE).schema
    return spark.createDataFrame([tuple(row.get(f.name) for f in schema.fields) for row in rows], schema)


def record(event_id: str, partition: int, offset: int, winner: bool) -> dict:
    return {KIND: RECORD, "topic": "t", "partition": partition, "offset": offset, "log_append_time": T0,
            "event_id": event_id, "event_type": "order_placed", "event_time": T0, "is_late": False,
            "is_winner": winner}


def test_a_winner_displaced_by_a_later_batch_leaves_the_events_and_its_displacer_takes_its_place(spark):
    rule = PIPELINE.lateness_rule(Settings())
    store = store_rows(spark, [record("e1", 1, 5, True), record("e1", 0, 9, True), record("e2", 0, 3, True),
                               record("e2", 2, 4, False),
                               {KIND: DISPLACED, "event_id": "e1", "partition": 1, "offset": 5}])
    events = spark.sql(events_query("{store}", PIPELINE, rule), store=store)
    assert sorted((r.event_id, r.partition, r.offset) for r in events.collect()) == [("e1", 0, 9), ("e2", 0, 3)]
    bronze = spark.sql(bronze_query("{store}", PIPELINE, rule), store=store)
    assert sorted((r.partition, r.offset, r.is_winner) for r in bronze.collect()) == [
        (0, 3, True), (0, 9, True), (1, 5, False), (2, 4, False)]


def test_compacting_the_rows_of_any_batches_leaves_every_gold_table_as_it_was(spark):
    """Rows of the batches from one to another, replaced by what compaction keeps of them, with the other batches'
    rows as they were: the same table. The batches from the first (every kept row a reset) and a segment after some
    (a reset kept only for a key that had one), with resets and empty resets among the batches."""
    settings = Settings()
    for seed in range(2):
        events = random_events(seed, 90)
        rng = random.Random(seed)
        parts = [events[i::6] for i in range(6)]
        resets = {rng.randrange(1, 6)}
        first = rng.randrange(1, 4)
        segments = [(0, rng.randrange(1, 5)), (first, rng.randrange(first, 5))]
        for gold in (MERCHANT_REVENUE, ORDER_STATUS, CUSTOMER_SESSIONS):
            rows, columns = stored(spark, gold, parts, settings, resets)
            if gold is ORDER_STATUS:  # an order left without events in batch 2, back in a later batch
                empty = spark.createDataFrame([("o3", 2, True, True)], f"order_id string, {BATCH} long, "
                                                                        f"{RESET} boolean, {EMPTY} boolean")
                rows = rows.unionByName(empty, allowMissingColumns=True)
            rows = rows.localCheckpoint()
            table = spark.sql(fold_query("{rows}", gold, columns), rows=rows).collect()
            for low, high in segments:
                inside = F.col(BATCH).between(low, high)
                kept = spark.sql(compacted_query("{rows}", gold, columns, segment=low > 0), rows=rows.where(inside))
                compacted = kept.unionByName(rows.where(~inside))
                assertDataFrameEqual(spark.sql(fold_query("{rows}", gold, columns), rows=compacted).collect(), table,
                                     checkRowOrder=False)
