"""A pid file that cannot be read, or holds no pid, means "not running", never an error."""

from __future__ import annotations

from spark_apps.services.processes import read_pid


def test_a_pid_file_holding_a_pid_gives_it(tmp_path):
    (tmp_path / "broker.pid").write_text("4242\n")
    assert read_pid(tmp_path / "broker.pid") == 4242


def test_a_missing_unreadable_or_garbled_pid_file_is_no_pid(tmp_path):
    home_that_is_a_file = tmp_path / "home"
    home_that_is_a_file.write_text("not a folder")
    (tmp_path / "folder.pid").mkdir()
    for name, text in (("cut.pid", ""), ("words.pid", "four"), ("huge.pid", "99999999999999999999"),
                       ("zero.pid", "0"), ("negative.pid", "-7")):
        (tmp_path / name).write_text(text)
    for path in (tmp_path / "absent.pid", home_that_is_a_file / "kafka" / "broker.pid", tmp_path / "folder.pid",
                 *(tmp_path / n for n in ("cut.pid", "words.pid", "huge.pid", "zero.pid", "negative.pid"))):
        assert read_pid(path) is None, path
