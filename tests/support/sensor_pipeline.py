"""A second pipeline, declared only in the test suite: temperature readings per device and hour.

It shares nothing with the marketplace but the engine: its own schema (even its id, type and time
fields have other names), topic, table prefix, keys and aggregation. The tests load it by
``module:attribute``, or register it as ``sensors`` under the entry-point group (``registration.py``).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_apps.pipeline.declaration import GoldTable, Pipeline
from spark_apps.pipeline.event_schema import EventSchema, FieldSpec

READING = "reading"
HOUR_S = 3600
ABSOLUTE_ZERO_TENTHS = -2732

SCHEMA = EventSchema(
    fields=(FieldSpec("reading_id", "string", "Unique id of the reading.", max_length=64),
            FieldSpec("kind", "string", "Always reading.", max_length=16),
            FieldSpec("measured_at", "timestamp", "When the device measured."),
            FieldSpec("schema_version", "long", "Version of this schema.", min_value=1),
            FieldSpec("device_id", "string", "The device; also the Kafka key.", max_length=32),
            FieldSpec("celsius_tenths", "long", "Temperature in tenths of a degree Celsius.",
                      min_value=ABSOLUTE_ZERO_TENTHS)),
    event_types=(READING,), id_field="reading_id", type_field="kind", time_field="measured_at",
    key_field="device_id")


def device_hour_rows(silver: DataFrame, settings) -> DataFrame:
    """Each reading belongs to the UTC hour it was measured in (epoch arithmetic: no time zone involved)."""
    return silver.withColumn(
        "hour_start", F.expr(f"timestamp_seconds(floor(unix_seconds(measured_at) / {HOUR_S}) * {HOUR_S})"))


def device_hourly(rows: DataFrame, settings) -> DataFrame:
    """Per device and hour: how many readings, the lowest, the highest and their sum (mean = sum / count,
    kept as two exact integers so stream and batch compare without rounding)."""
    return (rows.groupBy("device_id", "hour_start")
            .agg(F.count("*").cast("long").alias("readings"), F.min("celsius_tenths").alias("min_tenths"),
                 F.max("celsius_tenths").alias("max_tenths"), F.sum("celsius_tenths").alias("sum_tenths")))


DEVICE_HOURLY = GoldTable(
    name="device_hourly",
    recompute_keys=("device_id", "hour_start"),
    primary_keys=("device_id", "hour_start"),
    key_rows=device_hour_rows,
    compute=device_hourly,
    description="One row per device and UTC hour.",
)

PIPELINE = Pipeline(name="sensors", schema=SCHEMA, gold_tables=(DEVICE_HOURLY,), topic="sensors.readings",
                    table_prefix="sensors_", description="Temperature readings of devices.")
