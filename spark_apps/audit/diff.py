"""Exact comparison of a stream table version with its batch snapshot: equal or not, no tolerance.

Cheap first: rows are hashed (every column), hashes are summed per bucket (a window of the table when
it has ``window_start``, else a hash of its key), and only buckets whose count or sum differ are
compared row by row. Every differing key is classified:

- ``missing_in_stream``: the batch has rows for the key that the stream lacks;
- ``extra_in_stream``: the stream has rows (or more copies of a row) the batch does not;
- ``value_mismatch``: both have the key, with different values.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

MISSING = "missing_in_stream"
EXTRA = "extra_in_stream"
MISMATCH = "value_mismatch"
KINDS = (MISSING, EXTRA, MISMATCH)
WINDOW_COLUMN = "window_start"
SAMPLE_SIZE = 5


@dataclass(frozen=True)
class Bucket:
    bucket: str
    stream_rows: int
    batch_rows: int
    matches: bool


@dataclass
class TableDiff:
    """How one stream table compares with its snapshot."""

    label: str
    keys: tuple[str, ...]
    stream_rows: int = 0
    batch_rows: int = 0
    matched: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    buckets: list[Bucket] = field(default_factory=list)
    samples: dict[str, list[dict]] = field(default_factory=dict)
    schema_problem: str = ""
    seconds: float = 0.0

    @property
    def differing_buckets(self) -> list[str]:
        return [b.bucket for b in self.buckets if not b.matches]

    @property
    def exact(self) -> bool:
        return not self.schema_problem and not any(self.counts.values()) and self.stream_rows == self.batch_rows


def bucket_sql(columns: list[str], keys: tuple[str, ...], buckets: int) -> str:
    """The SQL expression that puts a row in its comparison bucket."""
    if WINDOW_COLUMN in columns:
        return f"coalesce(CAST(`{WINDOW_COLUMN}` AS STRING), 'null')"
    key_list = ", ".join(f"`{k}`" for k in keys)
    return f"CAST(pmod(xxhash64({key_list}), {buckets}) AS STRING)"


def _fingerprinted(df: DataFrame, keys: tuple[str, ...], bucket: str, columns: list[str]) -> DataFrame:
    return df.select(F.expr(bucket).alias("_bucket"), *[F.col(f"`{k}`") for k in keys],
                     F.xxhash64(*[F.col(f"`{c}`") for c in columns]).alias("_row_hash"))


def _bucket_totals(stream_fp: DataFrame, batch_fp: DataFrame) -> dict[tuple[str, str], tuple[int, int]]:
    """(side, bucket) -> (rows, sum of row hashes), both sides in one Spark job."""
    both = stream_fp.withColumn("_side", F.lit("stream")).unionByName(batch_fp.withColumn("_side", F.lit("batch")))
    rows = (both.groupBy("_side", "_bucket")
            .agg(F.count("*").alias("n"), F.sum(F.col("_row_hash").cast("decimal(38,0)")).alias("h")).collect())
    return {(r["_side"], r["_bucket"]): (r["n"], r["h"]) for r in rows}


def _schema_problem(stream: DataFrame, batch: DataFrame) -> str:
    described = lambda df: {f.name: f.dataType.simpleString() for f in df.schema.fields}  # noqa: E731
    s, b = described(stream), described(batch)
    if s == b:
        return ""
    parts = [f"{c} only in stream" for c in sorted(set(s) - set(b))]
    parts += [f"{c} only in batch" for c in sorted(set(b) - set(s))]
    parts += [f"{c} is {s[c]} in stream, {b[c]} in batch" for c in sorted(set(s) & set(b)) if s[c] != b[c]]
    return "schemas differ: " + "; ".join(parts)


def diff_table(label: str, stream: DataFrame, batch: DataFrame, keys: tuple[str, ...], buckets: int) -> TableDiff:
    """Compare two frames of the same table exactly and classify every differing key."""
    started = time.monotonic()
    result = TableDiff(label=label, keys=keys)
    result.schema_problem = _schema_problem(stream, batch)
    if result.schema_problem:
        result.stream_rows, result.batch_rows = stream.count(), batch.count()
        result.seconds = time.monotonic() - started
        return result
    columns = sorted(batch.columns)
    bucket = bucket_sql(columns, keys, buckets)
    stream_fp, batch_fp = (_fingerprinted(df, keys, bucket, columns) for df in (stream, batch))
    totals = _bucket_totals(stream_fp, batch_fp)
    stream_totals = {bucket: value for (side, bucket), value in totals.items() if side == "stream"}
    batch_totals = {bucket: value for (side, bucket), value in totals.items() if side == "batch"}
    for name in sorted(set(stream_totals) | set(batch_totals)):
        s, b = stream_totals.get(name, (0, None)), batch_totals.get(name, (0, None))
        result.buckets.append(Bucket(name, s[0], b[0], matches=s == b))
    result.stream_rows = sum(n for n, _ in stream_totals.values())
    result.batch_rows = sum(n for n, _ in batch_totals.values())
    result.matched = sum(b.batch_rows for b in result.buckets if b.matches)
    differing = [b.bucket for b in result.buckets if not b.matches]
    if differing:
        classified = _classify(stream_fp, batch_fp, keys, differing).localCheckpoint(eager=True)
        tally = {r["kind"]: r["n"] for r in classified.groupBy("kind").agg(F.count("*").alias("n")).collect()}
        result.matched += tally.pop(None, 0)
        result.counts.update(tally)
        result.samples = _samples(classified, stream, batch, keys)
    result.seconds = time.monotonic() - started
    return result


def _classify(stream_fp: DataFrame, batch_fp: DataFrame, keys: tuple[str, ...], buckets: list[str]) -> DataFrame:
    """One row per key of the differing buckets: its kind (null when the key matches after all)."""
    def per_key(fp: DataFrame, side: str) -> DataFrame:
        return (fp.where(F.col("_bucket").isin(buckets)).groupBy(*keys)
                .agg(F.count("*").alias(f"{side}_n"), F.array_sort(F.collect_list("_row_hash")).alias(f"{side}_h")))

    s, b = per_key(stream_fp, "s").alias("s"), per_key(batch_fp, "b").alias("b")
    on = [F.col(f"s.`{k}`").eqNullSafe(F.col(f"b.`{k}`")) for k in keys]
    joined = s.join(b, on, "full_outer")
    kind = (F.when(F.col("b_n").isNull(), F.lit(EXTRA))
            .when(F.col("s_n").isNull(), F.lit(MISSING))
            .when(F.col("s_h") == F.col("b_h"), F.lit(None))
            .when(F.col("s_n") > F.col("b_n"), F.lit(EXTRA))
            .when(F.col("s_n") < F.col("b_n"), F.lit(MISSING))
            .otherwise(F.lit(MISMATCH)))
    return joined.select(*[F.coalesce(F.col(f"s.`{k}`"), F.col(f"b.`{k}`")).alias(k) for k in keys],
                         kind.alias("kind"), F.coalesce("s_n", F.lit(0)).alias("stream_copies"),
                         F.coalesce("b_n", F.lit(0)).alias("batch_copies"))


def _samples(classified: DataFrame, stream: DataFrame, batch: DataFrame, keys: tuple[str, ...]) -> dict:
    """Up to ``SAMPLE_SIZE`` keys of each kind, with the stream's and the batch's rows as JSON."""
    picked = (classified.where(F.col("kind").isNotNull())
              .withColumn("_n", F.row_number().over(
Window.partitionBy("kind").orderBy(*keys)))
              .where(F.col("_n") <= SAMPLE_SIZE).drop("_n"))
    picked = picked.localCheckpoint(eager=True)

    def rows_of(df: DataFrame, side: str) -> DataFrame:
        as_json = F.to_json(F.struct(*[F.col(f"`{c}`") for c in df.columns if c not in ("key", "value")]))
        return (df.join(picked.select(*keys), list(keys), "left_semi")
                .groupBy(*keys).agg(F.array_sort(F.collect_list(as_json)).alias(side)))

    rows = (picked.join(rows_of(stream, "stream_rows"), list(keys), "left")
            .join(rows_of(batch, "batch_rows"), list(keys), "left").collect())
    samples: dict[str, list[dict]] = {}
    for row in sorted(rows, key=lambda r: tuple(str(r[k]) for k in keys)):
        samples.setdefault(row["kind"], []).append({
            "key": {k: str(row[k]) for k in keys}, "stream": list(row["stream_rows"] or []),
            "batch": list(row["batch_rows"] or [])})
    return samples
