"""Pure arithmetic over what the benchmark measured: percentiles, per-record latency, MERGE cost, growth."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence

PERCENTILES = (50, 95, 99)

Offsets = Mapping[int, int]


def percentiles(values: Sequence[float], points: Iterable[int] = PERCENTILES) -> dict[str, float | None]:
    """Nearest-rank percentiles (``p50``, ``p95``, ``p99``); ``None`` for an empty sample."""
    ordered = sorted(values)
    result: dict[str, float | None] = {}
    for point in points:
        if not ordered:
            result[f"p{point}"] = None
            continue
        rank = max(1, math.ceil(point / 100 * len(ordered)))
        result[f"p{point}"] = round(ordered[rank - 1], 3)
    return result


def rate(count: int, seconds: float) -> float:
    return round(count / seconds, 1) if seconds > 0 else 0.0


def record_latencies(records: Iterable[tuple[int, int, float]], batch_ranges: Mapping[int, tuple[Offsets, Offsets]],
                     visible_at: Mapping[int, float]) -> list[float]:
    """Seconds from each record's log append to the moment its micro-batch made it visible in gold.

    ``records`` are ``(partition, offset, appended_at_epoch_s)``; ``batch_ranges`` maps a batch id to its
    ``(start, end)`` offsets per partition (end exclusive, as Spark's offset log has them). A record of no
    timed batch (read before the timing began) has no latency and is left out.
    """
    starts: dict[int, list[tuple[int, int, int]]] = {}
    for batch_id, (start, end) in batch_ranges.items():
        if batch_id not in visible_at:
            continue
        for partition, last in end.items():
            first = start.get(partition, 0)
            if last > first:
                starts.setdefault(partition, []).append((first, last, batch_id))
    for ranges in starts.values():
        ranges.sort()
    latencies = []
    for partition, offset, appended_at in records:
        ranges = starts.get(partition, [])
        index = bisect.bisect_right(ranges, (offset, math.inf, math.inf)) - 1
        if index >= 0 and ranges[index][0] <= offset < ranges[index][1]:
            latencies.append(visible_at[ranges[index][2]] - appended_at)
    return latencies


def merge_cost_points(history: Iterable[Mapping]) -> list[dict]:
    """One point per MERGE commit of a table: its size before the MERGE and what the MERGE cost.

    ``history`` holds ``DESCRIBE HISTORY`` rows (``version``, ``operation``, ``operationMetrics``) in any order.
    Rows before a MERGE are the running sum of rows written minus rows deleted by every earlier commit.
    """
    rows = 0
    points = []
    for entry in sorted(history, key=lambda e: e["version"]):
        metrics = {k: int(v) for k, v in (entry.get("operationMetrics") or {}).items() if str(v).isdigit()}
        if entry["operation"] == "MERGE":
            points.append({
                "version": entry["version"], "rows_before": rows,
                "execution_ms": metrics.get("executionTimeMs", 0), "scan_ms": metrics.get("scanTimeMs", 0),
                "rewrite_ms": metrics.get("rewriteTimeMs", 0),
                "files_removed": metrics.get("numTargetFilesRemoved", 0),
                "rows_copied": metrics.get("numTargetRowsCopied", 0),
                "rows_changed": sum(metrics.get(k, 0) for k in (
                    "numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")),
            })
            rows += metrics.get("numTargetRowsInserted", 0) - metrics.get("numTargetRowsDeleted", 0)
        elif entry["operation"] in ("WRITE", "STREAMING UPDATE"):
            rows += metrics.get("numOutputRows", 0)
    return points


def flatness(points: Sequence[Mapping], field: str = "execution_ms") -> float | None:
    """Mean cost of the last third of the MERGEs over the first third: about 1 when the cost stays flat as the
    table grows, about the growth factor of the table when every MERGE scans all of it."""
    third = len(points) // 3
    if third == 0:
        return None
    first = sum(p[field] for p in points[:third]) / third
    last = sum(p[field] for p in points[-third:]) / third
    return round(last / first, 2) if first else None


def growth(seconds_by_size: Mapping[int, float]) -> list[dict]:
    """How time grows between consecutive sizes; ``exponent`` 1.0 is linear (time ~ size ** exponent)."""
    sizes = sorted(seconds_by_size)
    steps = []
    for small, large in zip(sizes, sizes[1:], strict=False):
        size_ratio = large / small
        time_ratio = seconds_by_size[large] / seconds_by_size[small] if seconds_by_size[small] else math.inf
        exponent = math.log(time_ratio) / math.log(size_ratio) if time_ratio > 0 and size_ratio > 1 else None
        steps.append({"from": small, "to": large, "size_ratio": round(size_ratio, 2),
                      "time_ratio": round(time_ratio, 2),
                      "exponent": round(exponent, 2) if exponent is not None else None})
    return steps


def stage_totals(batches: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Seconds per micro-batch stage summed over every batch, largest first: where the stream spends its time."""
    totals: dict[str, float] = {}
    for stages in batches:
        for stage, seconds in stages.items():
            totals[stage] = totals.get(stage, 0.0) + seconds
    return {k: round(v, 2) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}
