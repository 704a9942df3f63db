"""The determinism guard: each construct that would make a replay or a batch recompute differ is refused."""

from __future__ import annotations

import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

from spark_apps.marketplace.events import SCHEMA
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.pipeline.declaration import GoldTable, Pipeline, load_pipeline
from spark_apps.pipeline.determinism import NonDeterministicPlan, assert_deterministic
from spark_apps.stream.job import StreamJob
from spark_apps.target.resolution import target_of

pytestmark = pytest.mark.integration


def silver_events(spark, schema=SCHEMA):
    """An empty frame with a pipeline's event columns: the guard only needs the schema."""
    return spark.createDataFrame([], ", ".join(f"`{spec.name}` {spec.spark_type}" for spec in schema.fields))


def per_order(extra):
    """A compute that sums per order and adds one more column."""
    def compute(rows, settings):
        return rows.groupBy("order_id").agg(F.sum("amount_cents").alias("total"), extra())
    return compute


def with_column(extra):
    """A compute that adds one more column to every row."""
    def compute(rows, settings):
        return rows.withColumn("extra", extra())
    return compute


def identity(rows, settings):
    return rows


def pipeline_with(compute, key_rows=identity) -> Pipeline:
    table = GoldTable("orders", recompute_keys=("order_id",), primary_keys=("order_id",), key_rows=key_rows,
                      compute=compute)
    return Pipeline(name="probe", schema=SCHEMA, gold_tables=(table,))


def jitter(value):
    return value


REFUSED = {
    "current_timestamp": (with_column(F.current_timestamp), "current_timestamp() (reads the clock)"),
    "now": (with_column(F.now), "now() (reads the clock)"),
    "current_date": (with_column(F.current_date), "current_date() (reads the clock)"),
    "rand": (with_column(lambda: F.rand(42)), "rand(42L)"),
    "randn": (with_column(lambda: F.randn(7)), "randn(7L)"),
    "uuid": (with_column(F.uuid), "uuid()"),
    "shuffle": (with_column(lambda: F.shuffle(F.array("amount_cents"))), "shuffle(array(amount_cents))"),
    "non-deterministic udf": (
        with_column(lambda: F.udf(jitter, "long").asNondeterministic()("amount_cents")),
        "jitter(amount_cents) (a Python UDF marked non-deterministic)"),
    "monotonically_increasing_id": (with_column(F.monotonically_increasing_id), "monotonically_increasing_id()"),
    "first in a group-by": (per_order(lambda: F.first("event_id")), "first(event_id) (picks by arrival order"),
    "collect_list in a group-by": (per_order(lambda: F.collect_list("event_id")),
                                   "collect_list(event_id) (keeps arrival order"),
}


@pytest.mark.parametrize("compute, named", REFUSED.values(), ids=REFUSED.keys())
def test_each_non_deterministic_construct_is_refused_with_one_readable_line(spark, settings, compute, named):
    with pytest.raises(NonDeterministicPlan) as refused:
        assert_deterministic(pipeline_with(compute), silver_events(spark), settings)
    message = str(refused.value)
    assert message.startswith(f"pipeline 'probe', gold table 'orders': compute uses non-deterministic {named}")
    assert message.endswith("replay and reconciliation need the same output for the same log prefix "
                            "(README: why compute functions must be deterministic)")
    assert "\n" not in message


def test_key_rows_is_checked_too(spark, settings):
    pipeline = pipeline_with(identity, key_rows=with_column(lambda: F.rand(1)))
    with pytest.raises(NonDeterministicPlan, match=r"gold table 'orders': key_rows uses non-deterministic rand\(1L\);"):
        assert_deterministic(pipeline, silver_events(spark), settings)


ACCEPTED = {
    "first over an ordered window": with_column(
        lambda: F.first("event_id").over(Window.partitionBy("order_id").orderBy("event_time", "event_id"))),
    "a sorted collect_list": per_order(lambda: F.array_sort(F.collect_list("event_id"))),
    "min_by over a unique ordering": per_order(lambda: F.min_by("amount_cents", F.struct("event_time", "event_id"))),
}


@pytest.mark.parametrize("compute", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_order_sensitive_functions_pass_when_an_ordering_decides(spark, settings, compute):
    assert_deterministic(pipeline_with(compute), silver_events(spark), settings)


def test_the_marketplace_and_the_test_pipeline_are_accepted(spark, settings):
    assert_deterministic(PIPELINE, silver_events(spark), settings)
    sensors = load_pipeline("tests.support.sensor_pipeline:PIPELINE")
    assert_deterministic(sensors, silver_events(spark, sensors.schema), settings)


def test_the_stream_refuses_to_start_before_creating_any_table(spark, isolated_home):
    job = StreamJob(spark, isolated_home, target_of(isolated_home, pipeline_with(with_column(F.current_timestamp))))
    with pytest.raises(NonDeterministicPlan, match="current_timestamp"):
        job.prepare()
    assert not list(isolated_home.warehouse_dir.glob("*.db/*")), "a refused pipeline leaves no table behind"
    assert not job.checkpoint.exists()
