"""What the platform asks the operating system about the processes and ports it starts.

The broker, the local cluster, Airflow and the supervised stream each keep a pid file; before trusting one,
they check that the pid is alive, not a zombie, and still runs the command they started (pids are
recycled). A process is signalled through a pidfd, which names that process and no later one: a busy machine
hands a freed number out again within minutes, to a process or to a thread of one, and Linux signals a whole
process through any of its threads' numbers. Ports are checked before a service binds one. Linux's ``/proc`` is
read directly.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import socket
from pathlib import Path

from spark_apps.core.errors import BrokerError, PlatformError

# After SIGKILL the kernel only has to reap the process; longer means something is badly wrong.
KILLED_EXIT_TIMEOUT_S = 30.0
PROC = Path("/proc")


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the OS picks it); for services and tests started on the fly."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


# Linux's largest pid (kernel.pid_max can be at most 2^22).
MAX_PID = 4_194_304


def read_pid(path: Path) -> int | None:
    """The pid a pid file holds, or None: no file, an unreadable one (a folder, a home that is a file) or one that
    holds no pid (cut short, or a number no process can have)."""
    try:
        pid = int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if 0 < pid <= MAX_PID else None


def process_alive(pid: int) -> bool:
    """True for a live process; a zombie (exited, not yet reaped) counts as gone, and so does a number that is only
    a thread's (``kill(tid, 0)`` would answer for the thread's process)."""
    handle = _open_process(pid)
    if handle is None:
        return False
    try:
        return not _exits(handle, 0.0)
    finally:
        os.close(handle)


def _open_process(pid: int) -> int | None:
    """A pidfd on process ``pid``, or None when no process has that number (none, or only a thread)."""
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def _exits(handle: int, timeout_s: float) -> bool:
    """Whether the process of the pidfd ``handle`` has ended (a zombie included) or ends within ``timeout_s``."""
    waiter = select.poll()
    waiter.register(handle, select.POLLIN)
    return bool(waiter.poll(int(timeout_s * 1000)))


def cmdline(pid: int) -> list[str]:
    """A process's arguments; empty for a process that is gone or a zombie."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ProcessLookupError):
        return []
    return raw.decode(errors="replace").split("\0")[:-1]


def runs_with_argument(pid: int, argument: str) -> bool:
    """Guards against a recycled pid: the process must have been started with ``argument`` (our server.properties,
    say), which no other process on the machine has."""
    return argument in cmdline(pid)


def process_table(proc: Path = PROC) -> dict[int, tuple[int, int, int]]:
    """pid -> (parent pid, process group, session) of every live (not zombie) process.

    Processes end while /proc is read. One that is listed but gone before its stat is read (the kernel answers
    ENOENT or ESRCH) is left out, as if it had ended before the listing. The listing itself stats nothing:
    `Path.glob` does, and lets ESRCH through."""
    table = {}
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            fields = (proc / name / "stat").read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            table[int(name)] = (int(fields[1]), int(fields[2]), int(fields[3]))
    return table


def group_members(group: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    return [pid for pid, (_, pgid, _) in process_table().items() if pgid == group]


def groups_of_tree(group: int) -> set[int]:
    """``group`` and the process groups of every descendant of its members that stayed in their session.

    A service that runs work in process groups of its own (Airflow runs each task in one, and the task's children,
    such as `kappa reconcile` and its JVM, inherit it) is stopped only when those groups are signalled too. A
    descendant that started a session of its own (a detached daemon, like the supervised stream) is left alone."""
    table = process_table()
    sessions = {sid for _, pgid, sid in table.values() if pgid == group}
    tree = {pid for pid, (_, pgid, _) in table.items() if pgid == group}
    frontier = list(tree)
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, (ppid, _, sid) in table.items()
                    if ppid == parent and pid not in tree and sid in sessions]
        tree.update(children)
        frontier.extend(children)
    return {group} | {table[pid][1] for pid in tree}


def stop_process(pid: int, argument: str, timeout_s: float) -> None:
    """SIGTERM, then SIGKILL if it is still alive after ``timeout_s``; returns once it is gone.

    Only a process that still runs with ``argument`` is signalled (see :func:`runs_with_argument`); one that is
    gone, or a number that now names another process or a thread, is left alone."""
    handle = _open_process(pid)
    if handle is None:
        return
    try:
        ours = runs_with_argument(pid, argument)
        # Read while the pidfd's process still ran, the command line was that process's, not a successor's.
        if _exits(handle, 0.0) or not ours:
            return
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(handle, signal.SIGTERM)
        if _exits(handle, timeout_s):
            return
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(handle, signal.SIGKILL)
        if not _exits(handle, KILLED_EXIT_TIMEOUT_S):
            raise PlatformError(f"process {pid} did not exit within {KILLED_EXIT_TIMEOUT_S:.0f}s of SIGKILL")
    finally:
        os.close(handle)


def terminate_with_parent() -> None:
    """In the child, before exec: ask Linux to send SIGTERM when the parent exits."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home) / "bin" / "java" if java_home else None
    if candidate and candidate.exists():
        return str(candidate)
    found = shutil.which("java")
    if not found:
        raise BrokerError("Java was not found: install a JDK 17+ (e.g. apt-get install openjdk-17-jdk-headless) "
                          "or set JAVA_HOME")
    return found


def spark_home() -> Path:
    """The installed pyspark package: Spark's jars and its ``bin/`` scripts (spark-class, spark-submit, beeline)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent
