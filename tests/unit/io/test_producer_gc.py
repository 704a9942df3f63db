"""A run sent flat out pauses the cyclic garbage collector and leaves it as it found it, even when it fails."""

from __future__ import annotations

import gc

import pytest

from spark_apps.io.producer import _cyclic_gc_paused


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_off_inside_and_as_before_after(enabled):
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with pytest.raises(KeyboardInterrupt), _cyclic_gc_paused():
            assert not gc.isenabled()
            raise KeyboardInterrupt
        assert gc.isenabled() == enabled
    finally:
        (gc.enable if was else gc.disable)()
