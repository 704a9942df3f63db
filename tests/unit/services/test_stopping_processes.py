"""A pid read from a file may since name another process, or a thread of one: only the process started with
the expected argument is ever signalled, and a thread's number is no process at all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid

import pytest

from spark_apps.core.waiting import wait_for
from spark_apps.services.processes import process_alive, stop_process

# A process with a second thread that ignores SIGTERM, so only SIGKILL ends it; its marker argument names it.
STUBBORN = """
import signal, sys, threading
signal.signal(signal.SIGTERM, signal.SIG_IGN)
threading.Thread(target=threading.Event().wait, daemon=True).start()
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def stubborn():
    marker = f"--marker={uuid.uuid4().hex}"
    process = subprocess.Popen([sys.executable, "-c", STUBBORN, marker], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "ready\n"
    yield process, marker
    process.kill()
    process.wait()


def thread_id(pid: int) -> int:
    return wait_for(lambda: next((int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid), None),
                    f"a second thread in process {pid}", 10.0, 0.05)


def test_a_number_that_names_only_a_thread_is_no_live_process(stubborn):
    process, _ = stubborn
    assert process_alive(process.pid)
    assert not process_alive(thread_id(process.pid))


def test_an_exited_process_not_yet_reaped_is_not_alive():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    wait_for(lambda: open(f"/proc/{process.pid}/stat").read().rsplit(") ", 1)[1].startswith("Z"),
             "the child to become a zombie", 30.0, 0.05)
    assert not process_alive(process.pid)
    process.wait()


def test_a_process_that_ignores_sigterm_is_killed_after_the_timeout(stubborn):
    process, marker = stubborn
    stop_process(process.pid, marker, 0.5)
    assert process.wait(10) == -signal.SIGKILL


def test_a_process_started_with_another_argument_is_not_signalled(stubborn):
    process, _ = stubborn
    stop_process(process.pid, f"--marker={uuid.uuid4().hex}", 0.5)
    assert process.poll() is None


def test_a_thread_of_the_process_is_not_signalled_through_its_number(stubborn):
    """The thread's /proc entry shows its process's command line, marker included; ``kill(tid)`` would end the
    process."""
    process, marker = stubborn
    stop_process(thread_id(process.pid), marker, 0.5)
    assert process.poll() is None

