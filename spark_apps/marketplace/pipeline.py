"""The marketplace pipeline, declared through the same public API any user pipeline uses."""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark_apps.core.settings import Settings
from spark_apps.marketplace.events import ORDER_PLACED, ORDER_REFUNDED, PAYMENT_CAPTURED, SCHEMA
from spark_apps.marketplace.generator import config_for, generate
from spark_apps.pipeline.declaration import Fold, GoldTable, Pipeline, Sessions, Windows
from spark_apps.pipeline.synthetic import GeneratedRecord, GeneratorRequest

# Length of the event-time tumbling windows of gold.merchant_revenue, in seconds.
WINDOW_S = 60
# gold.customer_sessions cuts a customer's events where two are more than this many seconds apart.
SESSION_GAP_S = 300


def _amount_if(event_type: str) -> Column:
    return F.coalesce(F.sum(F.when(F.col("event_type") == event_type, F.col("amount_cents"))), F.lit(0)).cast(
        "long")


def revenue_key_rows(silver: DataFrame, settings: Settings) -> DataFrame:
    """Each event belongs to the tumbling event-time window that contains it."""
    width = WINDOW_S
    return silver.withColumn(
        "window_start", F.expr(f"timestamp_seconds(floor(unix_seconds(event_time) / {width}) * {width})"))


def merchant_revenue(rows: DataFrame, settings: Settings) -> DataFrame:
    """Per merchant, currency and window, partial: orders, money captured, refunded, and the distinct customers
    (kept as a sorted set, so partial rows of one window fold into its exact distinct count)."""
    return (rows.groupBy("merchant_id", "window_start", "currency")
            .agg(F.count(F.when(F.col("event_type") == ORDER_PLACED, True)).cast("long").alias("orders"),
                 _amount_if(PAYMENT_CAPTURED).alias("gross_cents"),
                 _amount_if(ORDER_REFUNDED).alias("refunds_cents"),
                 F.array_sort(F.collect_set("customer_id")).alias("customers")))


MERCHANT_REVENUE = GoldTable(
    name="merchant_revenue",
    recompute_keys=("merchant_id", "window_start"),
    primary_keys=("merchant_id", "window_start", "currency"),
    key_rows=revenue_key_rows,
    compute=merchant_revenue,
    description="One row per merchant, event-time tumbling window and currency.",
    fold=Fold(merge=("sum(orders) AS orders", "sum(gross_cents) AS gross_cents",
                     "sum(refunds_cents) AS refunds_cents",
                     "array_sort(array_distinct(flatten(collect_list(customers)))) AS customers"),
              output=("merchant_id", "window_start",
                      f"window_start + make_interval(0, 0, 0, 0, 0, 0, {WINDOW_S}) AS window_end", "currency",
                      "orders", "gross_cents", "refunds_cents", "gross_cents - refunds_cents AS net_cents",
                      "CAST(size(customers) AS BIGINT) AS distinct_customers")),
    windows=Windows(width_s=WINDOW_S),
)

# ---- gold.order_status ---------------------------------------------------------------------------

ORPHAN_PAYMENT = "orphan_payment"
ORPHAN_REFUND = "orphan_refund"
PLACED = "placed"
PAID = "paid"
REFUNDED = "refunded"


def order_key_rows(silver: DataFrame, settings: Settings) -> DataFrame:
    """Every marketplace event carries the order it belongs to, which is this table's key."""
    return silver


def _earliest(alias: str, event_type: str) -> Column:
    """The earliest event of a type in a group, with its attributes, by (event_time, event_id): a total order, so a
    tie in event time is broken by data, never by the order rows happen to arrive in. Null when the group has
    none."""
    return F.min(F.when(F.col("event_type") == event_type,
                        F.struct("event_time", "event_id", "customer_id", "merchant_id", "currency",
                                 "amount_cents"))).alias(alias)


def order_status(rows: DataFrame, settings: Settings) -> DataFrame:
    """Per order, partial: its earliest order, payment and refund (each with its attributes) and the sums paid and
    refunded, as a FULL OUTER JOIN of the three would pair them; the fold's output turns them into the row.

    Either side may be missing: a payment that arrives before its order is an orphan payment until the order
    arrives, then the same row (same ``order_id``) becomes a paid order, which the table's change feed shows as a
    retraction (update pre-image) and the new row (post-image). Several events of one type add up (payments,
    refunds); for an order placed twice the earliest placement counts.

    One aggregation per order, each side a conditional aggregate: that reads the rows once, where a join of three
    per-type aggregations reads them three times.
    """
    return (rows.where(F.col("event_type").isin(ORDER_PLACED, PAYMENT_CAPTURED, ORDER_REFUNDED))
            .groupBy("order_id")
            .agg(_earliest("placed", ORDER_PLACED),
                 _earliest("payment", PAYMENT_CAPTURED), _amount_if(PAYMENT_CAPTURED).alias("paid_cents"),
                 _earliest("refund", ORDER_REFUNDED), _amount_if(ORDER_REFUNDED).alias("refunded_cents")))


def _first_known(name: str) -> str:
    return f"coalesce(placed.{name}, payment.{name}, refund.{name}) AS {name}"


# With an order: refunded beats paid beats placed. Without one: an orphan payment or an orphan refund.
ORDER_STATUS_COLUMN = (f"CASE WHEN placed IS NULL AND payment IS NOT NULL THEN '{ORPHAN_PAYMENT}' "
                       f"WHEN placed IS NULL THEN '{ORPHAN_REFUND}' WHEN refund IS NOT NULL THEN '{REFUNDED}' "
                       f"WHEN payment IS NOT NULL THEN '{PAID}' ELSE '{PLACED}' END AS status")

ORDER_STATUS = GoldTable(
    name="order_status",
    recompute_keys=("order_id",),
    primary_keys=("order_id",),
    key_rows=order_key_rows,
    compute=order_status,
    description="One row per order id: its order, payments and refunds joined FULL OUTER, and its status.",
    fold=Fold(merge=("min(placed) AS placed", "min(payment) AS payment", "sum(paid_cents) AS paid_cents",
                     "min(refund) AS refund", "sum(refunded_cents) AS refunded_cents"),
              output=("order_id", _first_known("customer_id"), _first_known("merchant_id"), _first_known("currency"),
                      "placed.amount_cents AS order_amount_cents", "placed.event_time AS placed_at", "paid_cents",
                      "payment.event_time AS paid_at", "refunded_cents", "refund.event_time AS refunded_at",
                      ORDER_STATUS_COLUMN)),
)


# ---- gold.customer_sessions -----------------------------------------------------------------------

def customer_key_rows(silver: DataFrame, settings: Settings) -> DataFrame:
    """Every event counts for the customer it names; sessions never span two customers."""
    return silver


def _session_numbers(rows: DataFrame, gap_s: int) -> DataFrame:
    """Number each customer's sessions: a session starts at the first event and at every event more than
    ``gap_s`` after the previous one. Events are ordered by (event_time, event_id), a total order, so
    the numbering depends on the events alone."""
    by_time = Window.partitionBy("customer_id").orderBy("event_time", "event_id")
    gap_micros = F.unix_micros("event_time") - F.unix_micros(F.lag("event_time").over(by_time))
    starts_session = F.coalesce(gap_micros > F.lit(gap_s * 1_000_000), F.lit(True)).cast("int")
    running = by_time.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return (rows.withColumn("_starts_session", starts_session)
            .withColumn("_session", F.sum("_starts_session").over(running)))


def _count_of(event_type: str) -> Column:
    return F.count(F.when(F.col("event_type") == event_type, True)).cast("long")


def customer_sessions(rows: DataFrame, settings: Settings) -> DataFrame:
    """Per customer, maximal runs of events no more than ``SESSION_GAP_S`` apart: start, end, counts.

    A session is identified by its customer and first event time. An event that closes the gap between
    two sessions merges them: the earlier session's row grows and the later one's row is deleted.
    Counts, not amounts: a customer buys from merchants in different currencies.
    """
    sessions = _session_numbers(rows, SESSION_GAP_S)
    return (sessions.groupBy("customer_id", "_session")
            .agg(F.min("event_time").alias("session_start"), F.max("event_time").alias("session_end"),
                 F.count("*").cast("long").alias("events"), _count_of(ORDER_PLACED).alias("orders"),
                 _count_of(PAYMENT_CAPTURED).alias("payments"), _count_of(ORDER_REFUNDED).alias("refunds"))
            .withColumn("duration_ms", F.unix_millis("session_end") - F.unix_millis("session_start"))
            .select("customer_id", "session_start", "session_end", "duration_ms", "events", "orders", "payments",
                    "refunds"))


CUSTOMER_SESSIONS = GoldTable(
    name="customer_sessions",
    recompute_keys=("customer_id",),
    primary_keys=("customer_id", "session_start"),
    key_rows=customer_key_rows,
    compute=customer_sessions,
    description=f"One row per customer session: events no more than {SESSION_GAP_S} s apart in event time.",
    sessions=Sessions(gap_s=SESSION_GAP_S),
    fold=Fold(merge=("sum(events) AS events", "sum(orders) AS orders", "sum(payments) AS payments",
                     "sum(refunds) AS refunds"),
              output=("customer_id", "session_start", "session_end",
                      "unix_millis(session_end) - unix_millis(session_start) AS duration_ms", "events", "orders",
                      "payments", "refunds")),
)


def synthetic_events(request: GeneratorRequest) -> Iterator[GeneratedRecord]:
    """The marketplace generator (every hard case, labelled), its sessions paused longer than ``SESSION_GAP_S``."""
    return generate(config_for(request, session_gap_s=SESSION_GAP_S))


PIPELINE = Pipeline(
    name="marketplace",
    schema=SCHEMA,
    gold_tables=(MERCHANT_REVENUE, ORDER_STATUS, CUSTOMER_SESSIONS),
    description="An online marketplace: orders, payments, refunds.",
    generator=synthetic_events,
)
