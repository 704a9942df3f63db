"""A Delta table's commits, newest first, read from its log's commit files.

Delta's own history (``DeltaTable.forPath(...).history()``) first loads the table's snapshot, which runs Spark jobs
to rebuild the table's state; an audit asks it of every stream table to align on a micro-batch, and a micro-batch
asks it to find its own commit. The commit files say the same: each ``_delta_log/<version>.json`` holds one
``commitInfo`` action (its operation, ``userMetadata`` and operation metrics). As Delta's history, this lists only the
commits whose files the log still keeps. A table may live on local disk or on the object store; its log is read
through ``Location`` either way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from spark_apps.core.errors import PlatformError
from spark_apps.core.object_path import Location

COMMIT_FILE = re.compile(r"^(\d{20})\.json$")
CHECKSUM_FILE = re.compile(r"^(\d{20})\.crc$")


@dataclass(frozen=True)
class Commit:
    version: int
    operation: str = ""
    user_metadata: str | None = None
    metrics: dict[str, str] = field(default_factory=dict)
    timestamp_ms: int | None = None  # when the writer committed it

    @property
    def meta(self) -> dict:
        """The commit's ``userMetadata`` as JSON (the stream's and the audit's commits name their batch or run in
        it); empty when it has none or it is not a JSON object."""
        try:
            meta = json.loads(self.user_metadata) if self.user_metadata else {}
        except ValueError:
            return {}
        return meta if isinstance(meta, dict) else {}


def commit_versions(table: Location) -> list[int]:
    """The versions whose commit files the log holds, newest first."""
    log = table / "_delta_log"
    if not log.is_dir():
        raise PlatformError(f"{table} is not a Delta table (no _delta_log)")
    return sorted((int(m.group(1)) for m in map(COMMIT_FILE.match, (p.name for p in log.iterdir())) if m),
                  reverse=True)


def has_commits(table: Location) -> bool:
    """Whether a Delta table is there: its log holds a commit or a checkpoint (a folder, or a log a crashed create
    left empty, is no table yet)."""
    log = table / "_delta_log"
    return log.is_dir() and any(COMMIT_FILE.match(p.name) or p.name == "_last_checkpoint" for p in log.iterdir())


def latest_version(table: Location) -> int:
    versions = commit_versions(table)
    if not versions:
        raise PlatformError(f"{table} has no commit")
    return versions[0]


def commits(table: Location, limit: int | None = None) -> Iterator[Commit]:
    """The table's commits, newest first (at most ``limit``); read one file at a time, so a caller that stops early
    reads no older one."""
    versions = commit_versions(table)
    for version in versions if limit is None else versions[:limit]:
        yield read_commit(table, version)


def read_commit(table: Location, version: int) -> Commit:
    """One commit's ``commitInfo``. Delta writes it as the file's first action; the rest is read only if not."""
    path = table / "_delta_log" / f"{version:020d}.json"
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            try:
                action = json.loads(line) if line.strip() else {}
            except ValueError as exc:
                raise PlatformError(f"{path} line {number} is not a Delta action ({exc}); the table's log is "
                                    "damaged: restore the file from a backup") from None
            if "commitInfo" in action:
                info = action["commitInfo"]
                return Commit(version, info.get("operation") or "", info.get("userMetadata"),
                              {str(k): str(v) for k, v in (info.get("operationMetrics") or {}).items()},
                              info.get("timestamp"))
    return Commit(version)


def newest_checksum(table: Location) -> dict | None:
    """The newest checksum file of the log (``<version>.crc``, which Delta writes with each commit): the table's
    size, file count, metadata and protocol at that version, read without a Spark job. None when there is none."""
    log = table / "_delta_log"
    found = sorted((p for p in log.iterdir() if CHECKSUM_FILE.match(p.name)), reverse=True) if log.is_dir() else []
    for path in found:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # being written, or cut short by a crash: the one before still holds
            continue
    return None
