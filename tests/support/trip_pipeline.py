"""A third pipeline, declared only in the test suite, with the kinds a real public data set brings: taxi trips
with a double distance, a decimal fare, a boolean, a date and timestamps in any ISO-8601 offset or epoch ms.

Its gold table keeps every number exact: fares are summed as decimals, and of the double distances only the
longest is kept (a sum of doubles depends on the order of addition, a maximum does not).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_apps.pipeline.declaration import GoldTable, Pipeline
from spark_apps.pipeline.event_schema import EventSchema, FieldSpec

TRIP = "trip"

SCHEMA = EventSchema(
    fields=(FieldSpec("trip_id", "string", "Unique id of the trip.", max_length=64),
            FieldSpec("record_type", "string", "Always trip.", max_length=8),
            FieldSpec("picked_up_at", "timestamp", "Pick-up time, ISO-8601 with any offset."),
            FieldSpec("schema_version", "long", "Version of this schema.", min_value=1),
            FieldSpec("zone", "string", "Pick-up zone; also the Kafka key.", max_length=32),
            FieldSpec("service_day", "date", "The operator's service day."),
            FieldSpec("distance_km", "double", "Distance driven.", min_value=0),
            FieldSpec("fare", "decimal", "Fare in the local currency.", precision=10, scale=2, min_value=0),
            FieldSpec("shared", "boolean", "Whether the ride was shared."),
            FieldSpec("dropped_off_ms", "timestamp", "Drop-off time in epoch milliseconds.", epoch_millis=True)),
    event_types=(TRIP,), id_field="trip_id", type_field="record_type", time_field="picked_up_at",
    key_field="zone")


def zone_day_rows(silver: DataFrame, settings) -> DataFrame:
    return silver


def zone_daily(rows: DataFrame, settings) -> DataFrame:
    """Per zone and service day: trips, shared trips, the exact fare total and the longest distance."""
    return (rows.groupBy("zone", "service_day")
            .agg(F.count("*").cast("long").alias("trips"),
                 F.sum(F.col("shared").cast("long")).alias("shared_trips"),
                 F.sum("fare").alias("fares"), F.max("distance_km").alias("longest_km"),
                 F.max("dropped_off_ms").alias("last_drop_off")))


ZONE_DAILY = GoldTable(
    name="zone_daily",
    recompute_keys=("zone", "service_day"),
    primary_keys=("zone", "service_day"),
    key_rows=zone_day_rows,
    compute=zone_daily,
    description="One row per pick-up zone and service day.",
)

PIPELINE = Pipeline(name="trips", schema=SCHEMA, gold_tables=(ZONE_DAILY,), topic="trips.events",
                    table_prefix="trips_", description="Taxi trips with doubles, decimals, booleans and dates.")
