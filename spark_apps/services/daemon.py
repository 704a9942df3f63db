"""One lifecycle for every background process the platform starts: the broker, the catalog database, the local
cluster's Spark master and workers, and the SQL endpoint.

A daemon has a pid file and a *marker*, an argument of its command line no other process has (its config file,
its home), so a pid the system recycled for another process is never taken for it nor signalled. It starts in its
own session (it outlives the command that started it, and a test's dies with the test when asked), writes its
output to its log, is waited for until it is ready or has exited, and stops with SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from spark_apps.core.errors import PlatformError
from spark_apps.core.waiting import poll
from spark_apps.services.processes import (
    process_alive,
    read_pid,
    runs_with_argument,
    stop_process,
    terminate_with_parent,
)


@dataclass(frozen=True)
class Daemon:
    """``name`` is how messages call it; ``log`` is where a failed start points to (its output goes there unless
    the process writes a log of its own)."""

    name: str
    pid_file: Path
    marker: str
    log: Path
    stop_timeout_s: float

    def pid(self) -> int | None:
        """The pid of our running process, or None (a stale pid file is removed)."""
        pid = read_pid(self.pid_file)
        if pid is None:
            return None
        if process_alive(pid) and runs_with_argument(pid, self.marker):
            return pid
        self.pid_file.unlink(missing_ok=True)
        return None

    def launch(self, command: Sequence[str], *, output: Path | None = None, env: Mapping[str, str] | None = None,
               stop_with_parent: bool = False) -> subprocess.Popen:
        """Start ``command`` in its own session, its output appended to ``output`` (discarded without one), and
        record its pid. ``stop_with_parent``: it gets SIGTERM when the starting process ends (tests)."""
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        if output is not None:
            output.parent.mkdir(parents=True, exist_ok=True)
        sink = open(output, "ab") if output is not None else None  # noqa: SIM115 - closed once the child has it
        try:
            process = subprocess.Popen(
                list(command), stdout=subprocess.DEVNULL if sink is None else sink, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=dict(env) if env is not None else None, start_new_session=True,
                preexec_fn=terminate_with_parent if stop_with_parent else None)
        finally:
            if sink is not None:
                sink.close()
        self.pid_file.write_text(str(process.pid))
        return process

    def wait_ready(self, process: subprocess.Popen | None, ready: Callable[[], bool], timeout_s: float,
                   error: type[PlatformError], every_s: float = 0.25) -> bool:
        """Poll ``ready`` until it holds or ``timeout_s`` passes (False then); raise ``error`` naming the log as
        soon as the process we started has exited."""
        def answered() -> bool:
            if process is not None and process.poll() is not None:
                raise error(f"the {self.name} exited with code {process.returncode} while starting; see {self.log}")
            return ready()

        return bool(poll(answered, timeout_s, every_s=every_s))

    def stop(self) -> bool:
        """SIGTERM, then SIGKILL after ``stop_timeout_s``. True if it was running."""
        pid = self.pid()
        if pid is None:
            return False
        stop_process(pid, self.marker, self.stop_timeout_s)
        self.pid_file.unlink(missing_ok=True)
        return True
