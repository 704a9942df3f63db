"""The embedded S3-compatible server (S3Proxy) as the platform starts it; Delta tables on it through S3A, and the
platform's own reads of it through ``ObjectPath``."""

from __future__ import annotations

import pytest

from spark_apps.cli import main
from spark_apps.core.object_path import ObjectStoreUnavailable, remove_tree
from spark_apps.core.settings import Settings
from spark_apps.io.spark_session import get_spark
from spark_apps.services.object_store import secret_key
from tests.support.object_store import on_object_store

pytestmark = pytest.mark.integration
BUCKET = "kappa-warehouse"


@pytest.fixture(scope="module")
def bucket_settings(settings, object_store):
    return on_object_store(settings, object_store, BUCKET)


def test_spark_writes_and_reads_a_delta_table_on_the_embedded_s3_server(spark, bucket_settings, object_store):
    settings, server = bucket_settings, object_store
    get_spark(settings)  # the running session, given S3A settings for the bucket
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


def test_kappa_s3_status_says_whether_the_server_runs(bucket_settings, object_store, monkeypatch, capsys):
    settings, server = bucket_settings, object_store
    for key, value in settings.as_env().items():
        monkeypatch.setenv(key, value)
    assert main(["s3", "status"]) == 0
    assert capsys.readouterr().out.strip() == f"S3-compatible server running on {server.endpoint} (pid {server.pid()})"
    assert main(["s3", "up"]) == 0, "what `make up` runs: the server is up, with the settings' bucket"
    assert capsys.readouterr().out.strip() == (f"S3-compatible server running on {server.endpoint} "
                                               f"(pid {server.pid()}) with bucket(s) {BUCKET}")
    assert main(["s3", "create-bucket", "Bad_Name"]) == 1
    assert "is not a bucket name" in capsys.readouterr().err


def test_an_object_path_lists_reads_writes_and_deletes_like_a_local_folder(bucket_settings):
    root = bucket_settings.warehouse_dir / "paths-test"
    (root / "a.db" / "t1" / "_delta_log" / "00000000000000000000.json").write_text('{"commitInfo": {}}\n')
    (root / "a.db" / "t2" / "_delta_log" / "00000000000000000000.json").write_text("{}\n")
    (root / "a.db" / "t2" / "part-0.parquet").write_bytes(b"PAR1")
    (root / "b.db" / "notes.txt").write_text("no table")
    assert root.is_dir() and (root / "a.db").exists() and not (root / "c.db").exists()
    assert [p.name for p in root.iterdir()] == ["a.db", "b.db"]
    assert [p.name for p in (root / "a.db" / "t2").iterdir()] == ["_delta_log", "part-0.parquet"]
    assert [str(p) for p in root.glob("*.db/*/_delta_log")] == [
        f"{root}/a.db/t1/_delta_log", f"{root}/a.db/t2/_delta_log"]
    log = root / "a.db" / "t1" / "_delta_log" / "00000000000000000000.json"
    assert log.is_file() and not log.parent.is_file()
    with log.open(encoding="utf-8") as lines:
        assert list(lines) == ['{"commitInfo": {}}\n']
    with pytest.raises(FileNotFoundError):
        (root / "missing.json").read_text()
    remove_tree(root / "a.db")
    assert [p.name for p in root.iterdir()] == ["b.db"]
    remove_tree(root)
    assert not root.exists()


def test_an_object_store_that_does_not_answer_or_refuses_the_keys_is_one_readable_line(bucket_settings):
    from spark_apps.services.processes import free_port

    silent = bucket_settings.with_overrides(s3_endpoint=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ObjectStoreUnavailable) as unanswered:
        (silent.warehouse_dir / "x").exists()
    assert str(unanswered.value).startswith(f"the object store at {silent.s3_endpoint} did not answer")
    wrong = Settings.from_env(bucket_settings.as_env(), s3_secret_key="not-the-secret")
    with pytest.raises(ObjectStoreUnavailable) as denied:
        (wrong.warehouse_dir / "x").exists()
    assert "refused" in str(denied.value) and "not-the-secret" not in str(denied.value)
