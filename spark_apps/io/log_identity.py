"""Is the topic still the log the stream has read?

A topic deleted and recreated under the same name (or truncated) starts its offsets again at 0 and gets a new
topic id (KIP-516). Resuming on it would silently skip records (when the new log is shorter than what the stream
read) or mix two logs (when it is longer), and reconciliation could not see either: the batch side would read the
same new log. So the stream records the topic's id in its checkpoint when it first reads it, and every start of the
stream, every supervision round and every topic creation compares against that record:

- the stream refuses to start (``LogRewound``), before reading a record;
- the supervisor pages ``stream:<pipeline>:rewound`` and stops a running stream;
- ``ensure_topic`` (``kappa produce``, ``kappa topic``, the demo) refuses to create a topic a checkpoint has read.
"""

from __future__ import annotations

import json
from pathlib import Path

from spark_apps.core.errors import PlatformError

SOURCE_FILE = "kappa_source.json"
RUNBOOK_HINT = "see docs/runbook.md#stream-rewound"


class LogRewound(PlatformError):
    """The topic is not the log the stream has read: recreated, truncated, or gone."""


def log_problem(topic: str, recorded_id: str | None, current_id: str | None, read_through: dict[int, int],
                log_end: dict[int, int]) -> str:
    """Why the topic is not the log the stream read through ``read_through`` (per partition, the offset it read up
    to), or "" when it is. ``log_end`` is empty when the topic does not exist. An id that is not known (a
    checkpoint made before ids were recorded) is not compared: then only the offsets are."""
    if not log_end and (recorded_id or any(read_through.values())):
        return f"topic {topic}, which the stream has read, no longer exists"
    if recorded_id and current_id and recorded_id != current_id:
        return (f"topic {topic} has id {current_id}, but the stream read the topic with id {recorded_id}: it was "
                "deleted and recreated")
    behind = {p: (read, log_end.get(p)) for p, read in sorted(read_through.items())
              if read > 0 and (log_end.get(p) is None or log_end[p] < read)}
    if behind:
        shown = ", ".join(f"partition {p} ends at {'nothing' if end is None else f'{end:,}'} but was read to "
                          f"{read:,}" for p, (read, end) in behind.items())
        return f"the offsets of topic {topic} went backwards ({shown}): it was recreated or truncated"
    return ""


def refusal(problem: str, checkpoint: Path) -> LogRewound:
    """The one line a refused start or topic creation prints."""
    return LogRewound(f"{problem}. The stream of checkpoint {checkpoint} will not continue on it, so nothing is "
                      f"skipped or read twice; restore the topic, or rebuild from the new log with `kappa stream "
                      f"--reset --yes` ({RUNBOOK_HINT})")


def recorded_source(checkpoint: Path) -> dict | None:
    """``{"topic": ..., "topic_id": ...}`` as the stream recorded it in its checkpoint, or None."""
    path = checkpoint / SOURCE_FILE
    return json.loads(path.read_text()) if path.exists() else None


def record_source(checkpoint: Path, topic: str, topic_id: str | None) -> None:
    """Note the topic the checkpoint reads; kept from the first start on (a later start only compares)."""
    checkpoint.mkdir(parents=True, exist_ok=True)
    (checkpoint / SOURCE_FILE).write_text(json.dumps({"topic": topic, "topic_id": topic_id}) + "\n")


def checkpoints_reading(checkpoint_root: Path, topic: str) -> list[Path]:
    """Every checkpoint under ``checkpoint_root`` that has read ``topic``."""
    if not checkpoint_root.is_dir():
        return []
    return sorted(path.parent for path in checkpoint_root.glob(f"*/{SOURCE_FILE}")
                  if (recorded_source(path.parent) or {}).get("topic") == topic)
