"""A run sent flat out draws its records a portion at a time, in order, and pauses the cyclic garbage collector,
leaving it as it found it even when the run fails."""

from __future__ import annotations

import gc

import pytest

from spark_apps.io.producer import READ_AHEAD, _cyclic_gc_paused, _read_ahead


def test_records_come_in_order_drawn_a_portion_at_a_time():
    drawn = []

    def source():
        for number in range(3 * READ_AHEAD + 7):
            drawn.append(number)
            yield number

    records = _read_ahead(source())
    assert next(records) == 0 and len(drawn) == READ_AHEAD
    assert [0, *records] == list(range(3 * READ_AHEAD + 7))


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
