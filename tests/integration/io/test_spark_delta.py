"""Spark reads the log with explicit offsets and round-trips it through a Delta table."""

import json
import shutil

import pytest
from kafka import KafkaProducer

from spark_apps.io import delta_log
from spark_apps.io.catalog import (
    ensure_table,
    forget_foreign_tables,
    register_table,
    register_warehouse_tables,
    table_path,
)
from spark_apps.io.log_reader import read_log_range
from spark_apps.io.topics import partition_offsets

pytestmark = pytest.mark.integration


def test_spark_reads_an_offset_range_and_delta_history_records_the_write(spark, topic, settings, isolated_home):
    producer = KafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, enable_idempotence=True,
                             acks="all")
    for i in range(30):
        producer.send(topic, key=f"order-{i % 5}".encode(), value=json.dumps({"i": i}).encode())
    producer.flush()
    producer.close()
    offsets = partition_offsets(settings, topic)
    end = {p: hi for p, (_, hi) in offsets.items()}
    partial = {p: max(0, hi - 1) for p, hi in end.items()}

    records = read_log_range(spark, settings, topic, {p: 0 for p in end}, partial)
    assert records.count() == sum(partial.values())
    assert set(records.columns) >= {"key", "value", "topic", "partition", "offset", "timestamp",
                                    "timestampType"}
    assert {row.timestampType for row in records.select("timestampType").collect()} == {1}  # LogAppendTime

    full = read_log_range(spark, settings, topic, {p: 0 for p in end}, end)
    target = str(table_path(isolated_home, "demo.roundtrip"))
    full.write.format("delta").mode("append").save(target)
    register_warehouse_tables(spark, isolated_home)

    back = spark.table("demo.roundtrip")
    assert sorted(json.loads(bytes(r.value))["i"] for r in back.select("value").collect()) == list(range(30))
    history = spark.sql("DESCRIBE HISTORY demo.roundtrip").collect()
    assert [(h.version, h.operation) for h in history] == [(0, "WRITE")]
    spark.sql("DROP TABLE demo.roundtrip")


def test_python_workers_run_the_drivers_virtualenv_not_the_first_python3_on_path(spark):
    import sys

    prefixes = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("sys").prefix).collect()
    assert prefixes == [sys.prefix], "a pandas UDF would otherwise miss the virtualenv's packages"


def test_the_driver_jvm_compiles_the_huge_methods_spark_generates(spark):
    """HotSpot would otherwise leave a generated method above 8,000 bytes of bytecode in its interpreter for good."""
    jvm = spark.sparkContext._jvm
    diagnostics = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    assert diagnostics.getVMOption("DontCompileHugeMethods").getValue() == "false"


def test_a_name_registered_at_a_folder_since_deleted_is_registered_again_at_the_new_one(spark, settings, tmp_path):
    """A warehouse on a filesystem since unmounted, or deleted, leaves its names in a long-lived session's catalog."""
    gone, kept = (settings.with_overrides(warehouse_dir=tmp_path / name) for name in ("gone", "kept"))
    for owner in (gone, kept):
        spark.range(3 if owner is gone else 5).write.format("delta").save(str(table_path(owner, "scratch.numbers")))
    register_table(spark, gone, "scratch.numbers")
    shutil.rmtree(gone.warehouse_dir)
    register_table(spark, kept, "scratch.numbers")
    assert spark.table("scratch.numbers").count() == 5
    spark.sql("DROP TABLE scratch.numbers")


def test_ensure_table_creates_an_external_table_at_its_folder_under_a_name_another_warehouse_held(
        spark, settings, tmp_path):
    """A new table's name, which another warehouse registered, is pointed at this one's folder; dropping it later
    keeps the data, and ensuring the table again leaves it as it is."""
    other, here = (settings.with_overrides(warehouse_dir=tmp_path / name) for name in ("other", "here"))
    spark.range(4).write.format("delta").save(str(table_path(other, "scratch.ensured")))
    register_table(spark, other, "scratch.ensured")
    schema = spark.range(0).selectExpr("id", "CAST(id AS STRING) AS label").schema

    ensure_table(spark, here, "scratch.ensured", schema, properties={"delta.appendOnly": "true"})
    path = table_path(here, "scratch.ensured")
    entry = spark._jsparkSession.sharedState().externalCatalog().getTable("scratch", "ensured")
    assert entry.tableType().name() == "EXTERNAL"
    assert entry.storage().locationUri().get().getPath().rstrip("/") == str(path)
    assert spark.table("scratch.ensured").columns == ["id", "label"] and spark.table("scratch.ensured").count() == 0
    properties = {r.key: r.value for r in spark.sql("SHOW TBLPROPERTIES scratch.ensured").collect()}
    assert properties["delta.appendOnly"] == "true"
    assert spark.read.format("delta").load(str(table_path(other, "scratch.ensured"))).count() == 4

    ensure_table(spark, here, "scratch.ensured", schema, properties={"delta.appendOnly": "true"})
    assert delta_log.commit_versions(path) == [0], "an existing table is left as it is"
    spark.sql("DROP TABLE scratch.ensured")
    assert delta_log.has_commits(path), "only the name goes; the data stays"


def test_names_another_warehouse_registered_are_let_go_and_this_warehouses_are_kept(spark, settings, tmp_path):
    """dbt creates its marts by name: a name left by another warehouse on the catalog would point it elsewhere."""
    other, here = (settings.with_overrides(warehouse_dir=tmp_path / name) for name in ("other", "here"))
    for owner, table in ((other, "scratch.theirs"), (here, "scratch.ours")):
        spark.range(2).write.format("delta").save(str(table_path(owner, table)))
        register_table(spark, owner, table)
    forgotten = forget_foreign_tables(spark, here, "scratch")
    assert "scratch.theirs" in forgotten and "scratch.ours" not in forgotten
    assert not spark.catalog.tableExists("scratch.theirs")
    assert spark.table("scratch.ours").count() == 2
    assert (table_path(other, "scratch.theirs") / "_delta_log").exists(), "only the name goes; the data stays"
    spark.sql("DROP TABLE scratch.ours")


def test_replacing_a_delta_table_with_new_columns_gives_the_metastore_entry_those_columns(spark, tmp_path):
    """dbt's table models are CREATE OR REPLACE. Hive refuses, by default, to change the entry's placeholder column
    into the table's columns: an ERROR in every rerun's log and an entry whose columns say nothing to a client that
    reads the metastore itself."""
    location = tmp_path / "replaced"
    spark.sql("CREATE DATABASE IF NOT EXISTS scratch")
    spark.sql(f"CREATE OR REPLACE TABLE scratch.replaced USING delta LOCATION '{location}' AS SELECT 1 AS first")
    spark.sql(f"CREATE OR REPLACE TABLE scratch.replaced USING delta LOCATION '{location}' "
              "AS SELECT 'a' AS second, 2L AS third")
    hive = spark._jsparkSession.sharedState().externalCatalog().unwrapped().client()
    entry = hive.getTable("scratch", "replaced")
    assert [field.name() for field in entry.schema().fields()] == ["second", "third"]
    spark.sql("DROP TABLE scratch.replaced")


def test_the_spark_driver_maps_the_class_archive_make_jars_built(spark, settings):
    """Each Spark process starts faster by mapping the classes `make jars` archived (io/class_archive.py); a JVM
    maps the archive only when its class path and JDK match the ones it was built with."""
    archive = settings.spark_class_archive
    assert archive.is_file(), f"no class archive at {archive}: `make jars` builds it"
    driver = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    with open(f"/proc/{driver}/maps") as maps:
        assert str(archive) in maps.read(), "the driver JVM started without the class archive"
