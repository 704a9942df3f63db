"""What the platform asks the operating system about the processes and ports it starts.

The broker, the local cluster, Airflow and the supervised stream each keep a pid file; before trusting one,
they check that the pid is alive, not a zombie, and still runs the command they started (pids are
recycled). Ports are checked before a service binds one. Linux's ``/proc`` is read directly.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the OS picks it); for services and tests started on the fly."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def process_alive(pid: int) -> bool:
    """True for a live process; a zombie (exited, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        status = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1]
        return not status.startswith("Z")
    except (FileNotFoundError, IndexError):
        return True


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


def group_members(group: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == group:
            members.append(int(stat.parent.name))
    return members
