"""The distinct keys a micro-batch touches, fixed once, with the ranges that let a MERGE and a read skip files.

A micro-batch reads its keys many times: to pick the rows of those keys from silver, as a broadcast side of every
join, and for the MERGE condition's key range. Fixed as a checkpointed frame, each of those costs a Spark job of its
own (the checkpoint, one collect per broadcast, one aggregate for the range). A small batch's keys instead come to
the driver's JVM in one job, with their range, and go on as a local relation: broadcasting a local relation and
planning over it start no job. The keys never pass through Python, so their values keep their exact Spark types.

Each key column's range (its least and greatest value in the set) also bounds the reads of silver. Silver is
appended in log order, so a key that grows with the log (an order id, an event time) has a narrow range in each
file, and Delta skips the files outside a batch's range instead of scanning the whole table for a few keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_apps.pipeline.declaration import SPAN_HI, SPAN_LO, GoldTable, Windows

# Batches of at most this many records keep their keys in the driver (there are at most as many keys as records).
KEYS_IN_DRIVER_MAX_RECORDS = 20_000


Ranges = dict[str, tuple[str, str]]  # column -> (least, greatest) as SQL literals of the column's type


@dataclass(frozen=True)
class KeySet:
    """Distinct, non-null key rows and each key column's range (none when there are no keys). ``prune`` is
    `` AND t.k BETWEEN lo AND hi`` per key (`` AND false`` when there are none), for a MERGE condition."""

    frame: DataFrame
    keys: tuple[str, ...]
    ranges: Ranges

    @property
    def prune(self) -> str:
        return " AND " + _within_ranges(self.ranges, self.keys, "t.")

    @property
    def bounds(self) -> str:
        """SQL every row of the set's keys satisfies: each key column within its range (``false`` for no keys)."""
        return _within_ranges(self.ranges, self.keys)

    def rows_of(self, rows: DataFrame) -> DataFrame:
        """Only the rows whose key is in the set; the bounds are a filter first, which a read skips files by."""
        return rows.where(F.expr(self.bounds)).join(F.broadcast(self.frame), list(self.keys), "left_semi")

    def within_windows(self, rows: DataFrame, windows: Windows) -> DataFrame:
        """Only the rows whose ``windows.time_column`` lies in one of the set's windows or between two of them (the
        bound a read of silver skips files by); no rows when the set is empty."""
        return rows.where(_window_bound(self.ranges.get(windows.start_column), windows))


@dataclass(frozen=True)
class KeySpans:
    """Per key, one closed range of times (``SPAN_LO``, ``SPAN_HI``): the rows of a key within it, for a gold table
    of sessions. ``column`` is the target table's column the spans bound; ``prune`` bounds the keys and it to the
    whole set's range, for the MERGE condition, and ``time_range`` is that range for any time column, so a read
    skips the files outside it."""

    frame: DataFrame
    keys: tuple[str, ...]
    column: str
    prune: str
    time_range: tuple[str, str] | None

    def rows_of(self, rows: DataFrame, column: str | None = None) -> DataFrame:
        """Only the rows whose key is in the set and whose ``column`` (the target's by default) lies in that key's
        span."""
        column = column or self.column
        if self.time_range is None:
            return rows.where(F.lit(False))
        lo, hi = self.time_range
        spans = F.broadcast(self.frame).alias("_spans")
        matched = [rows[k] == F.col(f"_spans.{k}") for k in self.keys]
        within = rows[column].between(F.col(f"_spans.{SPAN_LO}"), F.col(f"_spans.{SPAN_HI}"))
        bounded = rows.where(F.col(column).between(F.expr(lo), F.expr(hi)))
        return bounded.join(spans, [*matched, within], "left_semi")


def key_set(keys_df: DataFrame, keys: tuple[str, ...], in_driver: bool) -> KeySet:
    """Fix ``keys_df`` (distinct key rows) for the rest of the batch: in the driver, or as a local checkpoint."""
    keys_df = keys_df.select(*keys)
    frame, values = _fixed(keys_df, {k: (k, k) for k in keys}, in_driver)
    types = {f.name: f.dataType.simpleString() for f in keys_df.schema.fields}
    return KeySet(frame, keys, _typed_ranges(values, types))


def key_spans(spans_df: DataFrame, keys: tuple[str, ...], column: str, in_driver: bool) -> KeySpans:
    """Fix ``spans_df`` (one row per key: the keys, ``SPAN_LO`` and ``SPAN_HI``) like :func:`key_set`; ``column`` is
    the target table's column the spans bound."""
    spans_df = spans_df.select(*keys, SPAN_LO, SPAN_HI)
    frame, values = _fixed(spans_df, {**{k: (k, k) for k in keys}, column: (SPAN_LO, SPAN_HI)}, in_driver)
    types = {f.name: f.dataType.simpleString() for f in spans_df.schema.fields}
    types[column] = types[SPAN_LO]
    ranges = _typed_ranges(values, types)
    return KeySpans(frame, keys, column, " AND " + _within_ranges(ranges, (*keys, column), "t."),
                    ranges.get(column))


def fixed_changes(gold: GoldTable, changes: DataFrame, in_driver: bool) -> KeySet | KeySpans:
    """What ``transforms.events.gold_changes`` found a micro-batch may change in ``gold``, fixed: its keys, or for a
    table of sessions its key spans."""
    if gold.sessions is None:
        return key_set(changes, gold.recompute_keys, in_driver)
    return key_spans(changes, gold.recompute_keys, gold.sessions.start_column, in_driver)


def _fixed(rows: DataFrame, ranges: dict[str, tuple[str, str]], in_driver: bool) -> tuple[DataFrame, dict]:
    """``rows`` fixed, and per named range the minimum of its first column and the maximum of its second, as
    strings (both None when there are no rows)."""
    bounds = [bound for i, (lo, hi) in enumerate(ranges.values())
              for bound in (F.min(lo).cast("string").alias(f"lo_{i}"), F.max(hi).cast("string").alias(f"hi_{i}"))]
    if in_driver:
        spark = rows.sparkSession
        row = rows.agg(F.collect_list(F.struct(*rows.columns)).alias("rows"), *bounds)._jdf.head()
        frame = DataFrame(spark._jsparkSession.createDataFrame(row.getList(0), rows._jdf.schema()), spark)
        found = [row.getString(1 + i) for i in range(len(bounds))]
    else:
        frame = rows.localCheckpoint(eager=True)
        first = frame.agg(*bounds).first()
        found = [first[i] for i in range(len(bounds))]
    return frame, {name: (found[2 * i], found[2 * i + 1]) for i, name in enumerate(ranges)}


def _typed_ranges(values: dict[str, tuple[str | None, str | None]], types: dict[str, str]) -> Ranges:
    """Bounds travel as strings cast back to the column's type, so no time zone or float formatting differs between
    Python and Spark. Empty when there were no rows."""
    if any(lo is None for lo, _ in values.values()):
        return {}
    return {column: (_typed_literal(lo, types[column]), _typed_literal(hi, types[column]))
            for column, (lo, hi) in values.items()}


def _within_ranges(ranges: Ranges, columns: tuple[str, ...], prefix: str = "") -> str:
    """SQL: each of ``columns`` (of the table aliased ``prefix``) lies in its range; ``false`` without ranges."""
    if not ranges:
        return "false"
    return " AND ".join(f"{prefix}`{c}` BETWEEN {ranges[c][0]} AND {ranges[c][1]}" for c in columns)


def _window_bound(window_starts: tuple[str, str] | None, windows: Windows) -> Column:
    if window_starts is None:
        return F.lit(False)
    first, last = window_starts
    time = F.col(windows.time_column)
    return (time >= F.expr(first)) & (time < F.expr(f"{last} + make_interval(0, 0, 0, 0, 0, 0, {windows.width_s})"))


def _typed_literal(text: str, spark_type: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("'", "\\'")
    return f"CAST('{escaped}' AS {spark_type})"
