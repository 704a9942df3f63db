"""The embedded S3-compatible server (S3Proxy) as the platform starts it, and Delta tables on it through S3A: the
first step to a warehouse on object storage."""

from __future__ import annotations

import pytest

from spark_apps.cli import main
from spark_apps.io.spark_session import object_store_conf
from spark_apps.services.object_store import ObjectStoreServer, secret_key
from spark_apps.services.processes import free_port

pytestmark = pytest.mark.integration
BUCKET = "kappa-warehouse"


@pytest.fixture(scope="module")
def object_store(settings, tmp_path_factory):
    """A server of this module's own, on a free port, stopped with the tests."""
    local = settings.with_overrides(s3_dir=tmp_path_factory.mktemp("s3"), s3_port=free_port())
    server = ObjectStoreServer(local, stop_with_parent=True)
    server.start()
    server.create_bucket(BUCKET)
    yield local.with_overrides(s3_endpoint=server.endpoint), server
    server.stop()


def use_for_bucket(spark, settings, bucket: str) -> None:
    """The session's S3A settings for one bucket, as a session started with ``settings`` has them for all."""
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in object_store_conf(settings).items():
        hadoop.set(key.replace("spark.hadoop.fs.s3a.", f"fs.s3a.bucket.{bucket}."), value)


def test_spark_writes_and_reads_a_delta_table_on_the_embedded_s3_server(spark, object_store):
    settings, server = object_store
    use_for_bucket(spark, settings, BUCKET)
    table = f"s3a://{BUCKET}/warehouse/numbers"
    spark.range(100).write.format("delta").save(table)
    spark.range(100, 150).write.format("delta").mode("append").save(table)
    assert spark.read.format("delta").load(table).count() == 150
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").orderBy("version").select("version", "operation")
    assert [tuple(r) for r in history.collect()] == [(0, "WRITE"), (1, "WRITE")]
    stored = sorted(p.name for p in (server.paths.buckets_dir / BUCKET / "warehouse" / "numbers" / "_delta_log")
                    .iterdir())
    assert "00000000000000000000.json" in stored and "00000000000000000001.json" in stored, \
        "the objects are on the server's disk"
    assert secret_key(settings) not in server.paths.log_file.read_text(), "the secret is in no log"


def test_kappa_s3_status_says_whether_the_server_runs(object_store, monkeypatch, capsys):
    settings, server = object_store
    for key, value in settings.as_env().items():
        monkeypatch.setenv(key, value)
    assert main(["s3", "status"]) == 0
    assert capsys.readouterr().out.strip() == f"S3-compatible server running on {server.endpoint} (pid {server.pid()})"
    assert main(["s3", "create-bucket", "Bad_Name"]) == 1
    assert "is not a bucket name" in capsys.readouterr().err
