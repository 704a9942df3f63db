"""Which service of the test session died under the tests, why, and what the machine looked like then.

When a worker's own Spark driver, broker or catalog database dies, each later test of that worker fails with the
same "Connection refused", and the report of the test it died in, the one that says why, scrolls away in the
middle of a long output. After each test a worker checks the services it watches. The first time one is gone, it
notes which one, during which test, how it ended, its last log lines, and the machine's memory, disk and thread
count. The suite prints every note after its last line. This module is a pytest plugin, loaded by
tests/conftest.py, whose session fixtures tell ``SERVICES`` what they started.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

from spark_apps.services.processes import process_table

LAST_LINES = 30
KERNEL_LOG_LINES = 10

# The exit codes that say why a JVM ended. In local mode Spark's executor runs in the driver, and its handler
# of a fatal error in a task ends the whole driver.
EXIT_MEANINGS = {
    50: "Spark's handler of an uncaught exception ended it",
    52: "Spark's handler of an OutOfMemoryError ended it (no heap left, or no memory for a new thread)",
    134: "the JVM aborted (a crash: see hs_err_pid<pid>.log in its working directory)",
    137: "SIGKILL: the kernel's out-of-memory killer, or a kill -9",
    143: "SIGTERM",
}


def exit_meaning(code: int | None) -> str:
    """How a process ended, from its exit status (None when it was not a child of this process)."""
    if code is None:
        return "exit status unknown (not a child of the test process)"
    if code < 0:
        name = signal.Signals(-code).name
        return f"killed by {name}" + (": the kernel's out-of-memory killer, or a kill -9" if code == -9 else "")
    meaning = EXIT_MEANINGS.get(code)
    return f"exit code {code}" + (f": {meaning}" if meaning else "")


def last_lines(path: Path, count: int = LAST_LINES) -> list[str]:
    try:
        with open(path, "rb") as log:
            log.seek(max(log.seek(0, os.SEEK_END) - 64 * 1024, 0))
            return log.read().decode(errors="replace").splitlines()[-count:]
    except OSError:
        return []


def machine_state(folders: Iterable[Path]) -> list[str]:
    """Memory, disk, threads and JVM crash files now, and what the kernel said of killed processes (if it lets us
    read its log)."""
    memory = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    state = [f"memory available: {memory['MemAvailable'].strip()} of {memory['MemTotal'].strip()}"]
    for folder in folders:
        usage = shutil.disk_usage(folder)
        state.append(f"disk free under {folder}: {usage.free // 2**20:,} MiB of {usage.total // 2**20:,} MiB")
    state.append(f"threads on the machine: {_threads():,}")
    state += [f"JVM crash file: {path}" for path in sorted(Path.cwd().glob("hs_err_pid*.log"))]
    return state + _kernel_kills()


def _threads() -> int:
    """Threads of every live process; one that ends while it is counted adds none."""
    count = 0
    for pid in process_table():
        with contextlib.suppress(OSError):
            count += len(os.listdir(f"/proc/{pid}/task"))
    return count


def _kernel_kills() -> list[str]:
    try:
        kernel = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    kills = [line for line in kernel.splitlines() if "Killed process" in line or "Out of memory" in line]
    return [f"kernel: {line}" for line in kills[-KERNEL_LOG_LINES:]]


@dataclass(frozen=True)
class Service:
    alive: Callable[[], bool]
    exit_code: Callable[[], int | None]
    logs: tuple[Path, ...]


class Watch:
    """The services one test process started for its whole session, and the deaths seen among them."""

    def __init__(self) -> None:
        self._services: dict[str, Service] = {}
        self.deaths: list[dict] = []

    def add(self, name: str, alive: Callable[[], bool], exit_code: Callable[[], int | None] = lambda: None,
            logs: Iterable[Path] = ()) -> None:
        self._services[name] = Service(alive, exit_code, tuple(logs))

    def forget(self, name: str) -> None:
        """The fixture that started it stops it now: that is no death."""
        self._services.pop(name, None)

    def check(self, during: str) -> None:
        for name, service in list(self._services.items()):
            if service.alive():
                continue
            del self._services[name]
            self.deaths.append({
                "service": name, "during": during, "at": time.strftime("%H:%M:%S"),
                "ended": exit_meaning(service.exit_code()),
                "logs": {str(log): last_lines(log) for log in service.logs},
                "machine": machine_state([Path(tempfile.gettempdir()), Path.cwd()]),
            })


def report(deaths: list[dict]) -> list[str]:
    """The lines the suite prints last, one block per death."""
    lines = []
    for death in deaths:
        where = f" on {death['worker']}" if death.get("worker") else ""
        lines.append(f"{death['service']}{where} died during {death['during']} (noticed at {death['at']}): "
                     f"{death['ended']}")
        lines += [f"  {fact}" for fact in death["machine"]]
        for log, tail in death["logs"].items():
            lines.append(f"  last lines of {log}:" if tail else f"  {log}: empty or missing")
            lines += [f"    {line}" for line in tail]
    return lines


# The plugin (tests/conftest.py loads it): each test process watches the services its session fixtures started.
SERVICES = Watch()
_DEATHS_ON_WORKERS: list[dict] = []


def pytest_runtest_logreport(report) -> None:
    if report.when == "teardown":
        SERVICES.check(report.nodeid)


def pytest_sessionfinish(session) -> None:
    """A worker hands its notes to the controller with its other output (xdist's ``workeroutput``)."""
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["service_deaths"] = json.dumps(SERVICES.deaths)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    deaths = json.loads(getattr(node, "workeroutput", {}).get("service_deaths", "[]"))
    _DEATHS_ON_WORKERS.extend({**death, "worker": node.gateway.id} for death in deaths)


def pytest_unconfigure(config) -> None:
    """After the suite's last line, where a CI log that shows only its head and tail still shows it."""
    if hasattr(config, "workerinput"):
        return
    lines = report([*_DEATHS_ON_WORKERS, *SERVICES.deaths])
    if lines:
        writer = config.get_terminal_writer()
        writer.sep("=", "services of the test session that died under it", red=True)
        for line in lines:
            writer.line(line)
