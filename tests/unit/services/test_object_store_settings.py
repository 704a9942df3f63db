"""How Spark is pointed at an S3-compatible endpoint, and how the embedded server keeps its secret (no JVM)."""

from __future__ import annotations

import pytest

from spark_apps.core.settings import Settings
from spark_apps.io.spark_session import object_store_conf
from spark_apps.services.object_store import ObjectStoreError, ObjectStoreServer, embedded_buckets, secret_key


def test_without_an_endpoint_s3a_is_left_as_hadoop_has_it(tmp_path):
    assert object_store_conf(Settings(home=tmp_path)) == {}


def test_an_endpoint_gives_path_style_s3a_with_its_keys_retries_and_tls_by_scheme(tmp_path):
    settings = Settings(home=tmp_path, s3_endpoint="http://127.0.0.1:9878", s3_access_key="kappa",
                        s3_secret_key="s3cr3t", s3_retries=3)
    assert object_store_conf(settings) == {
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9878", "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        "spark.hadoop.fs.s3a.path.style.access": "true", "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.access.key": "kappa", "spark.hadoop.fs.s3a.secret.key": "s3cr3t",
        "spark.hadoop.fs.s3a.attempts.maximum": "3", "spark.hadoop.fs.s3a.retry.limit": "3"}
    secure = settings.with_overrides(s3_endpoint="https://s3.example.internal")
    assert object_store_conf(secure)["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "true"
    assert "s3cr3t" not in repr(settings) and "s3cr3t" not in str(settings.s3_secret_key)


def test_the_embedded_server_generates_its_secret_once_and_keeps_it_private(tmp_path):
    settings = Settings(home=tmp_path)
    server = ObjectStoreServer(settings)
    server._configure()
    generated = secret_key(settings)
    assert len(generated) >= 24
    server._configure()
    assert secret_key(settings) == generated, "kept, not generated again"
    for private in (server.paths.credentials_file, server.paths.config_file):
        assert private.stat().st_mode & 0o777 == 0o600, private
    assert f"s3proxy.credential={generated}" in server.paths.config_file.read_text()
    assert secret_key(settings.with_overrides(s3_secret_key="given")) == "given", "a set secret wins"


@pytest.mark.parametrize("name", ["../etc", "Upper", "a", "-edge", "x" * 64, "has_underscore"])
def test_a_bucket_name_s3_would_refuse_is_refused(tmp_path, name):
    with pytest.raises(ObjectStoreError, match="is not a bucket name"):
        ObjectStoreServer(Settings(home=tmp_path)).create_bucket(name)


def test_make_up_starts_the_embedded_server_only_for_locations_on_it(tmp_path):
    embedded = Settings(home=tmp_path, s3_port=9878, s3_endpoint="http://127.0.0.1:9878/",
                        warehouse_dir="s3a://lake-w/warehouse", checkpoint_root="s3a://lake-c/checkpoints")
    assert embedded_buckets(embedded) == ["lake-c", "lake-w"]
    assert embedded_buckets(embedded.with_overrides(checkpoint_root=tmp_path / "c")) == ["lake-w"]
    assert embedded_buckets(embedded.with_overrides(s3_endpoint="https://s3.example.internal")) == [], \
        "another endpoint is not the embedded server's to serve"
    assert embedded_buckets(Settings(home=tmp_path)) == [], "a local warehouse needs no server"
