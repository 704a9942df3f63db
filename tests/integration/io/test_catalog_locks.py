"""Locks in the catalog's database: one holder at a time, a waiter gets it when the holder lets go, and a wait that
runs out is one line naming the holder."""

from __future__ import annotations

import threading
import uuid

import pytest

from spark_apps.io.catalog_locks import CatalogLock, LockTimeout, table_write
from spark_apps.io.fencing import CheckpointFence, FencedOut

pytestmark = pytest.mark.integration


def test_a_lock_has_one_holder_and_passes_to_a_waiter_when_released(spark, settings):
    name = f"table s3a://locks-test/{uuid.uuid4().hex}"
    first, second = CatalogLock(spark, settings, name), CatalogLock(spark, settings, name)
    assert first.try_acquire("first: pid 1 on here")
    assert not second.try_acquire("second"), "a second connection cannot take a held lock"
    assert second.holder() == "first: pid 1 on here"
    with pytest.raises(LockTimeout) as waited:
        second.acquire("second", timeout_s=1)
    assert str(waited.value).startswith(f"first: pid 1 on here has held {name} for more than 1s")

    released = threading.Timer(1.5, first.release)
    released.start()
    second.acquire("second", timeout_s=30)
    assert second.held and not first.held
    second.release()
    released.join()


def test_a_write_to_a_table_on_the_object_store_holds_its_lock_and_a_local_one_none(spark, settings, tmp_path):
    remote = settings.with_overrides(warehouse_dir="s3a://locks-test/warehouse").warehouse_dir / "t"
    with table_write(spark, settings, remote, "a test write"):
        other = CatalogLock(spark, settings, f"table {remote}")
        assert not other.try_acquire("another writer")
        assert other.holder().startswith("a test write: pid ")
    assert other.try_acquire("another writer"), "released when the write ends"
    other.release()
    with table_write(spark, settings, tmp_path / "t", "a local write"):
        pass


def test_a_checkpoint_on_the_object_store_is_fenced_through_the_catalog(spark, settings):
    checkpoint = settings.with_overrides(checkpoint_root=f"s3a://locks-test/{uuid.uuid4().hex}").checkpoint_root
    first = CheckpointFence(checkpoint, spark, settings)
    first.acquire()
    with pytest.raises(FencedOut) as refused:
        CheckpointFence(checkpoint, spark, settings).acquire()
    assert str(refused.value).startswith(f"another instance of this stream is running on checkpoint {checkpoint}")
    first.release()
    again = CheckpointFence(checkpoint, spark, settings)
    again.acquire()
    again.release()
