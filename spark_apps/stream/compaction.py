"""Compaction of the stream's store, off the hot path: each gold table's tail folded into its base.

The stream appends every micro-batch's gold rows (partial rows of a fold, resets of a recomputed key) and never
rewrites them, so a gold view folds more rows with every batch. Compaction replaces, per gold table, the rows of
every whole epoch the stream has finished with what they fold to: one reset row per primary key (a fold's partials
merged, without its output) or a key's latest reset, and nothing for a key without rows
(:func:`~spark_apps.pipeline.folds.compacted_query` says why every view returns the same rows after it).

Why it never conflicts with the running stream: it replaces whole partitions (``_kind`` = the table, ``_epoch`` up
to the last finished one) and the stream only appends to the epoch of its current batch or later; and its commit
is marked ``dataChange=false``, as an ``OPTIMIZE`` is, since no view's row changes. Each table is one commit whose
``userMetadata`` says which batches its base now covers, so a compaction killed half way leaves some tables
compacted and the others as they were, every view unchanged, and the next run goes on.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from spark_apps.core.settings import Settings
from spark_apps.io import stream_store
from spark_apps.io.catalog import table_path
from spark_apps.io.catalog_locks import table_write
from spark_apps.io.delta_writes import with_retries
from spark_apps.io.fencing import file_lock
from spark_apps.pipeline.folds import BATCH, EMPTY, RESET, compacted_query, q
from spark_apps.pipeline.target import Target
from spark_apps.transforms.store import COMPACTION, EPOCH, KIND, gold_column, gold_kind, gold_rows_query

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Compaction:
    """What compaction did to one gold table: the epochs and batches its base covers, rows before and after."""

    table: str
    through_epoch: int
    through_batch: int
    rows_before: int
    rows_after: int
    seconds: float

    def line(self) -> str:
        return (f"{self.table:36s} compacted through batch {self.through_batch} (epoch {self.through_epoch}): "
                f"{self.rows_before} rows -> {self.rows_after}, {self.seconds:.1f}s")


def compact(spark, settings: Settings, target: Target) -> list[Compaction]:
    """Compact every gold table of ``target``'s store through the last epoch the stream has finished; a table with
    nothing to fold is left alone. Returns what was done.

    One compaction of a store at a time (a lock file; another one finds it held and does nothing): each reads the
    store at a version and replaces what it read, so a second one reading before the first committed would put
    back rows the first already folded."""
    name = target.tables.store
    with file_lock(_lock_path(settings, name), wait=False) as held:
        if not held:
            log.info("compaction of %s: another compaction holds %s; nothing done", name, _lock_path(settings, name))
            return []
        return _compact(spark, settings, target)


def _lock_path(settings: Settings, store: str) -> Path:
    return settings.run_dir / f"compaction-{store}.lock"


def _compact(spark, settings: Settings, target: Target) -> list[Compaction]:
    from pyspark.sql import functions as F

    location = table_path(settings, target.tables.store)
    version = stream_store.latest_version(settings, target)
    relation = stream_store.relation(settings, target, version)
    newest = spark.sql(f"SELECT max({q(EPOCH)}) FROM {relation}").first()[0]
    if newest is None or newest == 0:
        log.info("compaction of %s: no finished epoch yet", target.tables.store)
        return []
    through = newest - 1
    found = stream_store.stored_layout(spark, settings, target, version)
    stored = stream_store.as_stored(target.pipeline, found)
    schema = found.schema
    done = []
    for gold in stored.gold_tables:
        started = time.monotonic()
        kind, columns = gold_kind(gold.name), found.gold_columns[gold.name]
        tail = f"(SELECT * FROM {relation} WHERE {q(KIND)} = '{kind}' AND {q(EPOCH)} <= {through})"
        counts = spark.sql(f"SELECT count(*) AS rows, count_if(NOT {q(RESET)} OR {q(EMPTY)}) AS folded, "
                           f"max({q(BATCH)}) AS batch FROM {tail}").first()
        rows = f"({gold_rows_query(tail, gold, columns)})"
        kept = spark.sql(compacted_query(rows, gold, columns)).localCheckpoint(eager=True)
        after = kept.count()
        if counts.rows == 0 or (counts.folded == 0 and after == counts.rows):
            continue
        written = kept.select(*[F.col(q(c)).alias(gold_column(gold.name, c)) for c in columns], F.col(BATCH),
                              F.lit(True).alias(RESET), F.lit(False).alias(EMPTY), F.lit(kind).alias(KIND),
                              F.lit(through).cast("long").alias(EPOCH))
        written = written.select(*[(F.col(q(f.name)) if f.name in written.columns else F.lit(None))
                                   .cast(f.dataType).alias(f.name) for f in schema.fields])
        covers = {COMPACTION: {"table": gold.name, "through_epoch": through, "through_batch": counts.batch,
                               "read_version": version}}
        writer = (written.write.format("delta").mode("overwrite")
                  .option("replaceWhere", f"{q(KIND)} = '{kind}' AND {q(EPOCH)} <= {through}")
                  .option("dataChange", "false").option("userMetadata", json.dumps(covers)))
        with table_write(spark, settings, location, f"compaction of {kind}"):
            with_retries(lambda w=writer: w.save(str(location)), f"compaction of {kind}")
        result = Compaction(target.tables.gold(gold.name), through, counts.batch, counts.rows, after,
                            time.monotonic() - started)
        log.info("%s", result.line())
        done.append(result)
    return done
