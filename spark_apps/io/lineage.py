"""Offset lineage: which log prefix every stream-table version reflects.

Spark's checkpoint holds, per micro-batch, the exact end offsets it planned
(``offsets/<batch>``) and the initial offsets of the query (``sources/0/0``). The streaming job
copies them into every Delta commit it makes (``userMetadata``) and into ``stream.commits``,
so for any table version ``V`` the prefix ``O`` can be read back from the table alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from spark_apps.core.errors import PlatformError
from spark_apps.core.object_path import Location
from spark_apps.io import delta_log


@dataclass(frozen=True)
class StreamPosition:
    """The log prefix a table version reflects."""

    table_version: int
    app_id: str
    batch_id: int
    topic: str
    start_offsets: dict[int, int]
    end_offsets: dict[int, int]
    code_version: str = ""  # what the stream ran for this batch ("" for a commit written before it was recorded)

    @property
    def records(self) -> int:
        """How many log records ``[start, end)`` spans."""
        return records_between(self.start_offsets, self.end_offsets)

    def describe(self) -> str:
        spans = ", ".join(f"p{p}=[{self.start_offsets.get(p, 0)},{o})" for p, o in sorted(self.end_offsets.items()))
        return (f"version {self.table_version}: batch {self.batch_id} of {self.app_id}; "
                f"topic {self.topic} {spans}")


def records_between(start: dict[int, int], end: dict[int, int]) -> int:
    """How many log records lie between two positions (a partition missing from ``start`` starts at 0)."""
    return sum(o - start.get(p, 0) for p, o in end.items())


def _read_log_file(path: Location) -> list[str]:
    lines = path.read_text().splitlines()
    if not lines or not lines[0].startswith("v"):
        raise PlatformError(f"unexpected checkpoint file format in {path}")
    return lines


def _offsets_of(line: str, topic: str) -> dict[int, int]:
    payload = json.loads(line)
    if topic not in payload:
        raise PlatformError(f"the checkpoint tracks {sorted(payload)}, not topic {topic!r}")
    return {int(p): int(o) for p, o in payload[topic].items()}


def planned_batches(checkpoint: Location) -> list[int]:
    return sorted(int(p.name) for p in (checkpoint / "offsets").glob("[0-9]*"))


def committed_batches(checkpoint: Location) -> list[int]:
    return sorted(int(p.name) for p in (checkpoint / "commits").glob("[0-9]*"))


def batch_end_offsets(checkpoint: Location, batch_id: int, topic: str) -> dict[int, int]:
    """The end offsets (exclusive) Spark planned for this micro-batch."""
    lines = _read_log_file(checkpoint / "offsets" / str(batch_id))
    return _offsets_of(lines[-1], topic)


def initial_offsets(checkpoint: Location, topic: str) -> dict[int, int]:
    """Where the query started reading the log."""
    path = checkpoint / "sources" / "0" / "0"
    raw = path.read_bytes()
    text = raw[raw.index(b"{"):].decode()
    return _offsets_of(text.strip().splitlines()[0], topic)


def batch_start_offsets(checkpoint: Location, batch_id: int, topic: str) -> dict[int, int]:
    """Where this micro-batch started: the previous batch's end, or the query's start."""
    earlier = [b for b in planned_batches(checkpoint) if b < batch_id]
    if earlier:
        return batch_end_offsets(checkpoint, earlier[-1], topic)
    return initial_offsets(checkpoint, topic)


def caught_up(settings, checkpoint: Location, topic: str) -> bool:
    """Spark's commit log covers the whole log: every record in ``topic`` now went through a committed batch."""
    from spark_apps.io.topics import partition_offsets

    done = committed_batches(checkpoint)
    consumed = batch_end_offsets(checkpoint, done[-1], topic) if done else {}
    return all(consumed.get(p, 0) >= end for p, (_, end) in partition_offsets(settings, topic).items())


# What the stream's own commits carry in their userMetadata (``stream.job``); a commit without all of it is another
# writer's, whatever else it says.
STREAM_COMMIT_KEYS = frozenset({"app_id", "batch_id", "topic", "stream_start_offsets", "end_offsets"})


def position_at(table_path: Location, version: int | None = None) -> StreamPosition:
    """The stream position recorded by the newest stream commit at or before ``version``."""
    versions = delta_log.commit_versions(table_path)
    if not versions:
        raise PlatformError(f"{table_path} has no history")
    latest = versions[0]
    wanted = latest if version is None else version
    if wanted > latest or wanted < 0:
        raise PlatformError(f"{table_path} has versions 0..{latest}, not {wanted}")
    for listed in (v for v in versions if v <= wanted):
        meta = delta_log.read_commit(table_path, listed).meta
        if STREAM_COMMIT_KEYS <= meta.keys():
            return StreamPosition(
                table_version=wanted, app_id=meta["app_id"], batch_id=meta["batch_id"], topic=meta["topic"],
                start_offsets={int(p): o for p, o in meta["stream_start_offsets"].items()},
                end_offsets={int(p): o for p, o in meta["end_offsets"].items()},
                code_version=meta.get("code_version", ""))
    raise PlatformError(f"version {wanted} of {table_path} precedes every stream commit")
