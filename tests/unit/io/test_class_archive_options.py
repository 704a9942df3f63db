"""A Spark driver's JVM options: it compiles Spark's huge generated methods, maps the class archive when `make jars`
built one, and starts as before when there is none."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_apps.core.settings import Settings
from spark_apps.io.spark_session import JIT_HUGE_METHODS, QUIET_CLASS_ARCHIVE, session_conf


@pytest.fixture
def jars(tmp_path) -> dict[str, Path]:
    """The Spark and catalog jar folders as `make jars` leaves them, by name: the options are read, no JVM starts."""
    for name in ("spark/delta-spark_2.13-4.0.0.jar", "spark/spark-sql-kafka-0-10_2.13-4.0.0.jar",
                 "catalog/derbyclient-10.17.1.0.jar", "catalog/derbyshared-10.17.1.0.jar"):
        (tmp_path / "jars" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "jars" / name).write_bytes(b"")
    return {"spark_jars_dir": tmp_path / "jars" / "spark", "catalog_jars_dir": tmp_path / "jars" / "catalog"}


def java_options(settings: Settings) -> list[str]:
    return session_conf(settings)["spark.driver.extraJavaOptions"].split()


def test_a_built_archive_is_mapped_by_the_driver_and_the_users_own_options_come_last(tmp_path, jars):
    archive = tmp_path / "spark-classes.jsa"
    archive.write_bytes(b"archive")
    options = java_options(Settings(home=tmp_path, **jars, spark_class_archive=archive,
                                    spark_driver_java_options="-XX:+FlightRecorder"))
    assert options[2:] == [JIT_HUGE_METHODS, f"-XX:SharedArchiveFile={archive}", QUIET_CLASS_ARCHIVE,
                           "-XX:+FlightRecorder"]
    assert options[0].startswith("-Dlog4j2.configurationFile=")
    assert options[1] == f"-Dkappa.spark.log={tmp_path / 'logs' / 'spark.log'}"


def test_without_an_archive_the_driver_gets_no_sharing_option(tmp_path, jars):
    options = java_options(Settings(home=tmp_path, **jars, spark_class_archive=tmp_path / "missing.jsa"))
    assert options[2:] == [JIT_HUGE_METHODS] and options[0].startswith("-Dlog4j2.configurationFile=")


def test_executors_on_a_cluster_compile_sparks_huge_generated_methods_too(tmp_path, jars):
    conf = session_conf(Settings(home=tmp_path, **jars, spark_master="spark://127.0.0.1:7077"))
    assert conf["spark.executor.extraJavaOptions"].split() == [JIT_HUGE_METHODS]
