"""The distinct keys a micro-batch touches, fixed once, with the range that lets a MERGE skip files.

A micro-batch reads its keys many times: to pick the rows of those keys from silver, as a broadcast side of every
join, and for the MERGE condition's key range. Fixed as a checkpointed frame, each of those costs a Spark job of its
own (the checkpoint, one collect per broadcast, one aggregate for the range). A small batch's keys instead come to
the driver's JVM in one job, with their range, and go on as a local relation: broadcasting a local relation and
planning over it start no job. The keys never pass through Python, so their values keep their exact Spark types.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

# Batches of at most this many records keep their keys in the driver (there are at most as many keys as records).
KEYS_IN_DRIVER_MAX_RECORDS = 20_000


@dataclass(frozen=True)
class KeySet:
    """Distinct, non-null key rows and `` AND t.k BETWEEN lo AND hi`` per key (`` AND false`` when there are none)."""

    frame: DataFrame
    keys: tuple[str, ...]
    prune: str

    def rows_of(self, rows: DataFrame) -> DataFrame:
        """Only the rows whose key is in the set."""
        return rows.join(F.broadcast(self.frame), list(self.keys), "left_semi")


def key_set(keys_df: DataFrame, keys: tuple[str, ...], in_driver: bool) -> KeySet:
    """Fix ``keys_df`` (distinct key rows) for the rest of the batch: in the driver, or as a local checkpoint."""
    keys_df = keys_df.select(*keys)
    bounds = [*[F.min(k).cast("string").alias(f"lo_{i}") for i, k in enumerate(keys)],
              *[F.max(k).cast("string").alias(f"hi_{i}") for i, k in enumerate(keys)]]
    if in_driver:
        spark = keys_df.sparkSession
        row = keys_df.agg(F.collect_list(F.struct(*keys)).alias("rows"), *bounds)._jdf.head()
        local = spark._jsparkSession.createDataFrame(row.getList(0), keys_df._jdf.schema())
        frame = DataFrame(local, spark)
        values = {f"lo_{i}": row.getString(1 + i) for i in range(len(keys))} | \
                 {f"hi_{i}": row.getString(1 + len(keys) + i) for i in range(len(keys))}
    else:
        frame = keys_df.localCheckpoint(eager=True)
        values = frame.agg(*bounds).first().asDict()
    types = {f.name: f.dataType.simpleString() for f in keys_df.schema.fields}
    return KeySet(frame, keys, _range_condition(values, keys, types))


def _range_condition(values: dict, keys: tuple[str, ...], types: dict[str, str]) -> str:
    """Bounds travel as strings cast back to the key's type, so no time zone or float formatting differs between
    Python and Spark."""
    parts = []
    for i, key in enumerate(keys):
        lo, hi = values[f"lo_{i}"], values[f"hi_{i}"]
        if lo is None:
            return " AND false"
        parts.append(f" AND t.`{key}` BETWEEN {_typed_literal(lo, types[key])} AND {_typed_literal(hi, types[key])}")
    return "".join(parts)


def _typed_literal(text: str, spark_type: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("'", "\\'")
    return f"CAST('{escaped}' AS {spark_type})"
