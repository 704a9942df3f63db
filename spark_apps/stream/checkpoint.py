"""The one rule that says whether a streaming checkpoint and the stream tables belong together.

The checkpoint (Spark's offset and commit logs, plus the platform's app id) says which micro-batches
ran; ``stream.commits`` says which batches the tables hold. If they disagree, resuming would
skip or repeat part of the log. The stream refuses to start on a disagreement, and daily maintenance
raises an alert for one; both read this rule.
"""

from __future__ import annotations

from pathlib import Path

APP_ID_FILE = "kappa_app_id"


def read_app_id(checkpoint: Path) -> str | None:
    """The app id the platform stored in a checkpoint, or None when it has none."""
    app_file = checkpoint / APP_ID_FILE
    return app_file.read_text().strip() if app_file.exists() else None


def checkpoint_problem(app_id: str | None, recorded: dict[str, int], done_before: int, done_after: int,
                       planned: bool = False) -> str:
    """Why the checkpoint and ``stream.commits`` disagree, or "" when they agree.

    ``recorded``: last batch per app id in the table; ``done_before``/``done_after``: the checkpoint's last
    committed batch (-1 for none), read before and after the table; ``planned``: the checkpoint has planned
    batches. The stream records a batch in the table before its checkpoint commits it, so one batch may be in
    flight: healthy is ``done_before <= last recorded <= done_after + 1``.
    """
    last = max(recorded.values(), default=-1)
    if app_id is None and planned:
        return f"the checkpoint has batches but no {APP_ID_FILE}: it was not made by this platform"
    if last >= 0 and app_id is None:
        owners = ", ".join(f"{a} up to batch {b}" for a, b in sorted(recorded.items()))
        return (f"the checkpoint is missing but the tables record batches up to {last} ({owners}): a restarted "
                "stream would reprocess the log into tables that already hold it")
    foreign = sorted(a for a in recorded if a != app_id)
    if foreign:
        return (f"the tables hold batches of {', '.join(foreign)} but the checkpoint belongs to {app_id}: "
                "a reset checkpoint would skip data")
    if last > done_after + 1:
        return f"the checkpoint is older than the tables: it committed batch {done_after}, the tables hold {last}"
    if last < done_before:
        return (f"the tables are behind the checkpoint: it committed batch {done_before}, the tables hold "
                f"{last if last >= 0 else 'none'}; they were restored or lost data")
    return ""
