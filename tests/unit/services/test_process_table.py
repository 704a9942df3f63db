"""The process table reads /proc while processes end: one that vanishes mid-read is left out, never an error."""

from __future__ import annotations

import os
from pathlib import Path

from spark_apps.services.processes import process_table


def _stat_line(pid: int, state: str, ppid: int, group: int, session: int) -> str:
    return f"{pid} (java (worker)) {state} {ppid} {group} {session} 0 -1 4194560\n"


def _proc(root: Path, entries: dict[str, str | None]) -> Path:
    for name, stat in entries.items():
        (root / name).mkdir()
        if stat is not None:
            (root / name / "stat").write_text(stat)
    return root


def test_the_table_holds_live_processes_and_leaves_out_zombies_and_non_process_entries(tmp_path):
    proc = _proc(tmp_path, {"100": _stat_line(100, "S", 1, 100, 100),
                            "101": _stat_line(101, "Z", 100, 100, 100),
                            "sys": None})
    assert process_table(proc) == {100: (1, 100, 100)}


def test_a_process_that_ends_between_the_listing_and_its_stat_is_left_out(tmp_path, monkeypatch):
    """The kernel answers ESRCH (not only ENOENT) for a process caught mid-exit, both when its /proc directory is
    stat'ed and when its stat file is read. The table must not stat the directories it lists, and skips the read."""
    proc = _proc(tmp_path, {"100": _stat_line(100, "S", 1, 100, 100),
                            "102": _stat_line(102, "S", 100, 100, 100),
                            "103": None})
    ending = str(proc / "102")
    real_stat, real_read_text = os.stat, Path.read_text

    def stat(path, *args, **kwargs):
        if str(path).startswith(ending):
            raise ProcessLookupError(3, "No such process", str(path))
        return real_stat(path, *args, **kwargs)

    def read_text(path, *args, **kwargs):
        if str(path).startswith(ending):
            raise ProcessLookupError(3, "No such process", str(path))
        return real_read_text(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(Path, "read_text", read_text)
    assert process_table(proc) == {100: (1, 100, 100)}


def test_the_real_table_has_this_process_with_its_group_and_session():
    assert process_table()[os.getpid()] == (os.getppid(), os.getpgid(0), os.getsid(0))
