"""Pure arithmetic over what the benchmark measured: percentiles, per-record latency, growth, Spark
jobs per micro-batch and micro-batch cost against table size."""

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
                     visible_at: Mapping[int, float]) -> list[tuple[float, float]]:
    """Per record, ``(appended_at, latency)``: its log append time and the seconds from it to the moment its
    micro-batch made it visible in gold.

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
            latencies.append((appended_at, visible_at[ranges[index][2]] - appended_at))
    return latencies


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


def audit_figures(sizes: Sequence[Mapping]) -> dict:
    """The audit at the largest log the run built, under issue 20's keys: ``full`` recomputes the whole log;
    ``incremental`` extends that full run by the new events since (``share_of_full``: its time over the full one's)."""
    audited = [s for s in sizes if s.get("recompute_and_reconcile")]
    if not audited:
        return {"full": None, "incremental": None}
    largest = max(audited, key=lambda s: s["events"])
    full = largest["recompute_and_reconcile"]
    figures = {"full": {"log_events": largest["events"], "seconds": full["seconds"],
                        "exact_match": full["exact_match"]}, "incremental": None}
    extended = largest.get("incremental_audit")
    if extended:
        figures["incremental"] = {
            "log_events": extended["log_events"], "new_events": extended["new_events"],
            "seconds": extended["seconds"], "exact_match": extended["exact_match"],
            "share_of_full": round(extended["seconds"] / full["seconds"], 3) if full["seconds"] else None}
    return figures


def stage_totals(batches: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Seconds per micro-batch stage summed over every batch, largest first: where the stream spends its time."""
    totals: dict[str, float] = {}
    for stages in batches:
        for stage, seconds in stages.items():
            totals[stage] = totals.get(stage, 0.0) + seconds
    return {k: round(v, 2) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


def latency_timeline(points: Iterable[tuple[float, float]], bucket_s: float = 5.0) -> list[dict]:
    """Latency over a run: per ``bucket_s`` of log append time (seconds since the first append), how many records
    were appended and their p50 and max latency; what a chart of latency against time needs, in a few rows."""
    ordered = sorted(points)
    if not ordered:
        return []
    start = ordered[0][0]
    buckets: dict[int, list[float]] = {}
    for appended_at, latency in ordered:
        buckets.setdefault(int((appended_at - start) // bucket_s), []).append(latency)
    return [{"t_s": round(index * bucket_s, 1), "records": len(values), "p50": percentiles(values, (50,))["p50"],
             "max": round(max(values), 3)} for index, values in sorted(buckets.items())]


def per_batch(counts_by_batch: Mapping[int, int]) -> dict:
    """A count per micro-batch (Spark jobs it started, Delta commits it made): the total over the batches, the mean
    and the nearest-rank p50 and max."""
    counts = list(counts_by_batch.values())
    if not counts:
        return {"batches": 0, "total": 0, "mean": None, "p50": None, "max": None}
    return {"batches": len(counts), "total": sum(counts), "mean": round(sum(counts) / len(counts), 1),
            "p50": percentiles(counts, (50,))["p50"], "max": max(counts)}


def table_size_points(batches: Iterable[Mapping]) -> list[dict]:
    """Each micro-batch of a run, in the order they ran, with the rows its tables held before it: the records of
    every earlier batch (every batch of a run appends to the same tables, so this is bronze's size)."""
    rows = 0
    points = []
    for batch in batches:
        points.append({"rows_before": rows, "records": batch["records"], "seconds": batch["seconds"]})
        rows += batch["records"]
    return points


def batches_of_size(points: Iterable[Mapping], records: int) -> list[Mapping]:
    """The micro-batches that hold about ``records`` (more than half): Kafka's source splits a batch's limit over
    the partitions and rounds each share down, so batches of a fixed limit hold a record or two less, and a last
    one holds the few left over, which is not a batch of that size."""
    return [p for p in points if p["records"] > records // 2]


SMALL_TABLE_ROWS = 100_000
LARGE_TABLE_ROWS = 1_000_000


def batch_cost_growth(points: Sequence[Mapping], small_max: int = SMALL_TABLE_ROWS,
                      large_min: int = LARGE_TABLE_ROWS) -> dict:
    """p50 micro-batch seconds where the tables held at most ``small_max`` rows before the batch, p50 where they
    held at least ``large_min``, and large over small (``None`` when a side has no batch): about 1 when a batch's
    cost does not depend on how big the tables already are. Only batches of one size compare so: a batch of
    200,000 records over empty tables against batches of 2,000 over large ones says nothing about table size."""
    small = [p for p in points if p["rows_before"] <= small_max]
    large = [p for p in points if p["rows_before"] >= large_min]
    small_p50 = percentiles([p["seconds"] for p in small], (50,))["p50"]
    large_p50 = percentiles([p["seconds"] for p in large], (50,))["p50"]
    ratio = round(large_p50 / small_p50, 2) if small_p50 and large_p50 is not None else None
    return {"small_max_rows": small_max, "large_min_rows": large_min,
            "small": {"batches": len(small), "p50_s": small_p50,
                      "records_p50": percentiles([p["records"] for p in small], (50,))["p50"]},
            "large": {"batches": len(large), "p50_s": large_p50,
                      "records_p50": percentiles([p["records"] for p in large], (50,))["p50"]},
            "ratio": ratio}
