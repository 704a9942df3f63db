"""An ``s3a://`` location as the settings read it and as the platform names things under it (no server here: the
reads and writes against a real one are in tests/integration/services/test_object_store.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_apps.core.errors import SettingsError
from spark_apps.core.object_path import ObjectPath, ObjectStoreUnavailable, parse
from spark_apps.core.paths import checkpoint_path
from spark_apps.core.settings import Settings


def test_a_warehouse_given_as_an_s3a_uri_is_an_object_path_bound_to_the_endpoint_and_keys(tmp_path):
    settings = Settings.from_env({"KAPPA_WAREHOUSE_DIR": "s3a://lake-1/kappa/warehouse/",
                                  "KAPPA_S3_ENDPOINT": "http://127.0.0.1:9000", "KAPPA_S3_SECRET_KEY": "s3cr3t"},
                                 home=tmp_path)
    warehouse = settings.warehouse_dir
    assert isinstance(warehouse, ObjectPath) and str(warehouse) == "s3a://lake-1/kappa/warehouse"
    assert (warehouse.bucket, warehouse.key) == ("lake-1", "kappa/warehouse")
    assert warehouse.access.endpoint == "http://127.0.0.1:9000" and warehouse.access.secret_key() == "s3cr3t"
    assert "s3cr3t" not in repr(warehouse) and "s3cr3t" not in repr(settings)
    assert settings.checkpoint_root == tmp_path / "checkpoints", "the checkpoints stay local unless asked"


def test_an_object_path_names_children_parents_and_suffixes_as_a_local_path_does():
    table = parse("s3a://lake-1/warehouse") / "stream.db" / "marketplace_store"
    assert str(table / "_delta_log" / "00000000000000000003.json") == \
        "s3a://lake-1/warehouse/stream.db/marketplace_store/_delta_log/00000000000000000003.json"
    assert table.name == "marketplace_store" and table.parent == parse("s3a://lake-1/warehouse/stream.db")
    commit = table / "_delta_log" / "00000000000000000003.json"
    assert (commit.suffix, commit.stem) == (".json", "00000000000000000003")
    assert str(commit.with_suffix(".crc")).endswith("_delta_log/00000000000000000003.crc")
    assert str(table.with_name("other")) == "s3a://lake-1/warehouse/stream.db/other"
    assert parse("s3a://lake-1/a//b/") == parse("s3a://lake-1/a/b") and len({parse("s3a://lake-1/a"), table}) == 2
    assert sorted([parse("s3a://lake-1/b"), parse("s3a://lake-1/a")])[0] == parse("s3a://lake-1/a")


def test_a_checkpoint_on_the_object_store_is_named_under_its_root(tmp_path):
    settings = Settings(home=tmp_path, checkpoint_root="s3a://lake-1/checkpoints")
    assert str(checkpoint_path(settings, "marketplace", generation="g2")) == \
        "s3a://lake-1/checkpoints/marketplace__g2"


def test_settings_on_the_object_store_survive_the_trip_through_a_child_process_environment(tmp_path):
    settings = Settings(home=tmp_path, warehouse_dir="s3a://lake-1/w", checkpoint_root="s3a://lake-1/c",
                        s3_endpoint="http://127.0.0.1:9000")
    again = Settings.from_env(settings.as_env())
    assert (again.warehouse_dir, again.checkpoint_root) == (settings.warehouse_dir, settings.checkpoint_root)
    assert again.warehouse_dir.access.endpoint == "http://127.0.0.1:9000"
    moved = settings.with_overrides(s3_endpoint="http://127.0.0.1:9001")
    assert moved.checkpoint_root.access.endpoint == "http://127.0.0.1:9001", "the location follows its endpoint"


@pytest.mark.parametrize(("value", "says"), [
    ("gs://lake-1/warehouse", "only s3a:// object storage is supported"),
    ("s3a:///warehouse", "names no bucket"),
    ("s3a://Lake_1/warehouse", "names no bucket"),
])
def test_a_location_this_cannot_use_is_one_line_naming_the_variable(value, says, tmp_path):
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({"KAPPA_WAREHOUSE_DIR": value}, home=tmp_path)
    assert str(refused.value).startswith("KAPPA_WAREHOUSE_DIR: ") and says in str(refused.value)


def test_a_local_warehouse_stays_a_local_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = Settings.from_env({"KAPPA_WAREHOUSE_DIR": "lake/warehouse"})
    assert settings.warehouse_dir == tmp_path / "lake" / "warehouse"
    assert isinstance(settings.warehouse_dir, Path)


def test_an_object_path_is_never_taken_for_a_local_file():
    path = parse("s3a://lake-1/warehouse/notes.txt")
    with pytest.raises(TypeError):
        open(path)  # noqa: SIM115 - must fail before opening anything
    with pytest.raises(ObjectStoreUnavailable, match="no object-store settings"):
        path.read_text()
    with pytest.raises(ValueError, match="reading only"):
        path.open("w")
