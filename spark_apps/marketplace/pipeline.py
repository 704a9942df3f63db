"""The marketplace pipeline, declared through the same public API any user pipeline uses."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_apps.marketplace.events import ORDER_PLACED, ORDER_REFUNDED, PAYMENT_CAPTURED, SCHEMA
from spark_apps.pipeline import GoldTable, Pipeline
from spark_apps.settings import Settings


def _amount_if(event_type: str) -> F.Column:
    return F.coalesce(F.sum(F.when(F.col("event_type") == event_type, F.col("amount_cents"))), F.lit(0)).cast(
        "long")


def revenue_key_rows(silver: DataFrame, settings: Settings) -> DataFrame:
    """Each event belongs to the tumbling event-time window that contains it."""
    width = int(settings.window_s)
    return silver.withColumn(
        "window_start", F.expr(f"timestamp_seconds(floor(unix_seconds(event_time) / {width}) * {width})"))


def merchant_revenue(rows: DataFrame, settings: Settings) -> DataFrame:
    """Per merchant, currency and window: orders, money captured, refunded, net, distinct customers."""
    width = int(settings.window_s)
    return (rows.groupBy("merchant_id", "window_start", "currency")
            .agg(F.count(F.when(F.col("event_type") == ORDER_PLACED, True)).cast("long").alias("orders"),
                 _amount_if(PAYMENT_CAPTURED).alias("gross_cents"),
                 _amount_if(ORDER_REFUNDED).alias("refunds_cents"),
                 F.count_distinct("customer_id").cast("long").alias("distinct_customers"))
            .withColumn("net_cents", F.col("gross_cents") - F.col("refunds_cents"))
            .withColumn("window_end", F.col("window_start") + F.expr(f"make_interval(0, 0, 0, 0, 0, 0, {width})"))
            .select("merchant_id", "window_start", "window_end", "currency", "orders", "gross_cents",
                    "refunds_cents", "net_cents", "distinct_customers"))


MERCHANT_REVENUE = GoldTable(
    name="merchant_revenue",
    recompute_keys=("merchant_id", "window_start"),
    primary_keys=("merchant_id", "window_start", "currency"),
    key_rows=revenue_key_rows,
    compute=merchant_revenue,
    description="One row per merchant, event-time tumbling window and currency.",
)

PIPELINE = Pipeline(
    name="marketplace",
    schema=SCHEMA,
    gold_tables=(MERCHANT_REVENUE,),
    description="An online marketplace: orders, payments, refunds.",
)
