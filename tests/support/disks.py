"""A small filesystem that really fills up: a tmpfs mounted for one test, and a file that takes its last byte."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path


class CannotMount(Exception):
    """This machine does not let the tests mount a filesystem (not root, or no CAP_SYS_ADMIN)."""


@contextlib.contextmanager
def small_tmpfs(mount_point: Path, size_mb: int) -> Iterator[Path]:
    """Mount a tmpfs of ``size_mb`` at ``mount_point`` for the block; always unmounted after it."""
    mount_point.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        raise CannotMount("there is no `mount` command")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0700", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise CannotMount(f"`mount -t tmpfs` failed: {(done.stderr or done.stdout).strip()}")
    try:
        yield mount_point
    finally:
        if subprocess.run(["umount", str(mount_point)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def fill(filesystem: Path, name: str = "filler") -> Path:
    """Write zeros into ``filesystem`` until the kernel answers ENOSPC; return the file to delete to free it."""
    filler = filesystem / name
    chunk = bytes(1 << 20)
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while True:
            try:
                if os.write(fd, chunk) == 0:
                    break
            except OSError as full:
                if full.errno != errno.ENOSPC:
                    raise
                break
    finally:
        os.close(fd)
    return filler


def free_bytes(filesystem: Path) -> int:
    stats = os.statvfs(filesystem)
    return stats.f_bavail * stats.f_frsize
