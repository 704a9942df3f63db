"""One line for on-call out of a failed query's message, which is a Python traceback inside a Java stack trace.

The first exception line of that message is always a wrapper (py4j's "An error occurred while calling o91.save");
what happened is the innermost cause. A write that failed names its table, and a full disk says so in words, with
what to do: the batch is not in Spark's commit log and its writes are idempotent, so freeing space and starting
the stream again redoes it exactly once.
"""

from __future__ import annotations

import re

# At the start of a line: Java's "Caused by:" of the main chain (those of "Suppressed:" blocks are indented) or the
# ": " py4j puts before the Java exception, then a dotted class or a builtin, and its message if it has one.
_EXCEPTION_LINE = re.compile(
    r"^(?:Caused by: |: )?(?P<line>(?:(?:[\w$]+\.)+[\w$]+|\w*(?:Error|Exception|Fault))(?:: .*)?)$")
_WRAPPERS = ("py4j.", "An error occurred while calling", "An exception was raised by the Python Proxy",
             "[STREAM_FAILED]", "[FOREACH_BATCH_USER_FUNCTION_ERROR]")
_WRITING = re.compile(r"Task failed while writing rows to (?:file:)?(?P<path>\S+?)\.?(?:\s|$)")
DISK_FULL = "No space left on device"


def root_cause(detail: str) -> str:
    """The innermost exception line that is not a py4j or streaming wrapper; the first line if there is none.

    An exception line is Java's ``Caused by: pkg.Class: message`` or the last line of a Python traceback, which names
    a builtin (``OSError: ...``) or a dotted class (``spark_apps.stream.job.CheckpointMismatch: ...``)."""
    causes = [match["line"].strip() for match in map(_EXCEPTION_LINE.match, detail.splitlines())
              if match and not any(wrapper in match["line"] for wrapper in _WRAPPERS)]
    if causes:
        return causes[-1]
    return detail.strip().splitlines()[0] if detail.strip() else "unknown error"


def failure_summary(detail: str) -> str:
    """What stopped the query, in one line."""
    cause = root_cause(detail)
    writing = _WRITING.search(detail)
    where = f" while writing {writing['path']}" if writing else ""
    if DISK_FULL in cause or DISK_FULL in detail:
        return (f"the disk is full ({cause}){where}; Spark's checkpoint did not commit the batch, and every write of "
                "it is idempotent: free space and start the stream again, it redoes that batch exactly once")
    return f"the streaming query failed: {cause}{where}"
