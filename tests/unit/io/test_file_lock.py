"""The one file lock the serving cut, compaction and the alert outbox hold."""

from __future__ import annotations

from spark_apps.io.fencing import file_lock


def test_a_held_lock_refuses_a_second_holder_without_waiting_and_frees_on_exit(tmp_path):
    path = tmp_path / "run" / "compaction-stream.lock"
    with file_lock(path) as first:
        with file_lock(path, wait=False) as second:
            assert (first, second) == (True, False)
    with file_lock(path, wait=False) as again:
        assert again is True


def test_locks_on_different_files_do_not_exclude_each_other(tmp_path):
    with file_lock(tmp_path / "serving-a.lock", wait=False) as a, \
            file_lock(tmp_path / "serving-b.lock", wait=False) as b:
        assert (a, b) == (True, True)
