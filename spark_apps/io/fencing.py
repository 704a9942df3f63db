"""Fencing: at most one running instance of a streaming job per checkpoint.

Without it, a second ``kappa stream`` on the same checkpoint (a supervisor that restarts a job it wrongly believes
dead, an operator starting one by hand) runs next to the first: both plan the same micro-batches and write the same
tables until Spark's offset log happens to collide. The idempotent writes keep the rows right, but which instance
dies, and when, is luck. The fence makes the second one refuse at start, with one line naming the holder.

The fence is an exclusive ``flock`` on ``<checkpoint>.lock`` beside the checkpoint folder (so deleting or resetting
the checkpoint cannot remove it while it is held). The kernel drops the lock when the holding process ends, however
it ends (``kill -9`` included), so a crashed job never leaves a stale fence behind. ``flock`` is local to one
machine (and not reliable on NFS). A checkpoint on object storage, which streams on several machines may share, is
fenced instead by a lock in the catalog's database, which Derby drops with its holder's connection, however the
holder ends.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from spark_apps.core.errors import PlatformError
from spark_apps.core.object_path import Location, ObjectPath
from spark_apps.core.settings import Settings
from spark_apps.io.catalog_locks import CatalogLock, holder_line


class FencedOut(PlatformError):
    """Another live instance holds the job's checkpoint."""


def lock_path(checkpoint: Path) -> Path:
    return checkpoint.with_name(checkpoint.name + ".lock")


class CheckpointFence:
    """Holds the fence of one checkpoint from :meth:`acquire` until :meth:`release` (or the process ends).

    A local checkpoint is fenced by a ``flock`` beside it; one on object storage, which no two machines share a
    lock on, by a lock in the catalog's database (``io.catalog_locks``), which ``spark``'s JVM reaches."""

    def __init__(self, checkpoint: Location, spark=None, settings: Settings | None = None) -> None:
        self.checkpoint = checkpoint
        self._shared = CatalogLock(spark, settings, f"checkpoint {checkpoint}") \
            if isinstance(checkpoint, ObjectPath) else None
        self.path = lock_path(checkpoint) if isinstance(checkpoint, Path) else None
        self._file: TextIO | None = None

    @property
    def held(self) -> bool:
        return self._file is not None or (self._shared is not None and self._shared.held)

    def acquire(self) -> None:
        """Take the fence, or raise FencedOut naming the instance that holds it. Re-entrant for its holder."""
        if self._shared is not None:
            if not self._shared.try_acquire(holder_line("the stream")):
                raise self._refusal(self._shared.holder())
            return
        if self._file is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")  # noqa: SIM115 - held open for the job's life, closed by release()
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "an unknown process"
            handle.close()
            raise self._refusal(holder) from None
        handle.seek(0)
        handle.truncate()
        handle.write(holder_line("the stream") + "\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        """Let another instance start; a local fence's holder line stays as a record of the last holder."""
        if self._shared is not None:
            self._shared.release()
            return
        if self._file is None:
            return
        fcntl.flock(self._file, fcntl.LOCK_UN)
        self._file.close()
        self._file = None

    def _refusal(self, holder: str) -> FencedOut:
        return FencedOut(f"another instance of this stream is running on checkpoint {self.checkpoint} "
                         f"({holder}); a second writer is refused - stop that one first")


@contextmanager
def file_lock(path: Path, wait: bool = True) -> Iterator[bool]:
    """Hold an exclusive ``flock`` on ``path`` for the block (created with its folder if missing). Without ``wait``,
    yields False at once when another process holds it. The kernel drops it with its process, as the fence."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
