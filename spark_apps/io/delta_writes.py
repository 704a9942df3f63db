"""Idempotent Delta writes of the batch side (the incremental audit's snapshot tables), the commit metadata every
commit carries, and the retry of a commit that conflicted with a concurrent one.

Appends carry Delta's ``txnAppId``/``txnVersion`` writer options. MERGE ignores writer options but
honours the same pair as session settings, reset after each commit by
``spark.databricks.delta.write.txnVersion.autoReset.enabled``. Either way Delta skips a write
whose (app id, version) the table already recorded.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

from delta.exceptions import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    DeltaConcurrentModificationException,
    MetadataChangedException,
    ProtocolChangedException,
)
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_apps.io.key_sets import KeySet, KeySpans
from spark_apps.pipeline.folds import folded

if TYPE_CHECKING:
    from spark_apps.core.settings import Settings
    from spark_apps.pipeline.declaration import GoldTable

log = logging.getLogger(__name__)
T = TypeVar("T")
CONFLICT_RETRIES = 3
CONFLICTS = (DeltaConcurrentModificationException, ConcurrentWriteException, MetadataChangedException,
             ProtocolChangedException, ConcurrentAppendException, ConcurrentDeleteReadException,
             ConcurrentDeleteDeleteException, ConcurrentTransactionException)

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
# Set on every batch snapshot table when it is written. With deletion vectors a MERGE of the incremental audit
# marks the rows it replaces and writes only those, instead of copying every other row of the files they sit in.
DELETION_VECTORS = "delta.enableDeletionVectors"
MERGE_TARGET_PROPERTIES = {DELETION_VECTORS: "true"}
# Marks the recomputed rows in ``merge_source``'s outer join, apart from the keys it adds to delete.
RECOMPUTED = "_recomputed"


@contextmanager
def commit_metadata(spark, metadata: dict) -> Iterator[None]:
    """Stamp every Delta commit made inside the block with ``metadata`` (JSON in ``userMetadata``)."""
    spark.conf.set(USER_METADATA, json.dumps(metadata, sort_keys=True, separators=(",", ":")))
    try:
        yield
    finally:
        spark.conf.unset(USER_METADATA)


def idempotent_append(df: DataFrame, path: str, app_id: str, batch_id: int) -> None:
    """Append once per (app id, batch id), however often it is called."""
    (df.write.format("delta").mode("append")
     .option("txnAppId", app_id).option("txnVersion", str(batch_id))
     .save(path))


@contextmanager
def _transaction(spark, app_id: str, batch_id: int) -> Iterator[None]:
    """MERGE's (app id, version) pair: Delta skips the MERGE when the table recorded it already."""
    spark.conf.set(TXN_APP_ID, app_id)
    spark.conf.set(TXN_VERSION, str(batch_id))
    try:
        yield
    finally:
        spark.conf.unset(TXN_APP_ID)
        spark.conf.unset(TXN_VERSION)


def merge_source(recomputed: DataFrame, gone: DataFrame, primary_keys: tuple[str, ...]) -> DataFrame:
    """``recomputed``'s rows (``_delete`` false) and a tombstone (``_delete`` true, no values) for each key of
    ``gone`` that has no recomputed row.

    One pass over the recomputed rows: a key they lack leaves the outer join with no recomputed row. An anti join
    against them would compute them a second time, silver read and all, only to broadcast their keys."""
    return (recomputed.withColumn(RECOMPUTED, F.lit(True))
            .join(gone, list(primary_keys), "full_outer")
            .withColumn("_delete", F.col(RECOMPUTED).isNull()).drop(RECOMPUTED))


def upsert_recomputed(spark, path: str, primary_keys: tuple[str, ...], affected: KeySet | KeySpans,
                      recomputed: DataFrame, app_id: str, batch_id: int) -> None:
    """Make the rows of the ``affected`` keys equal to ``recomputed``: update, insert, delete the rest.

    Only target rows of the affected keys are read or touched; the merge condition carries the
    min/max of each recompute key so Delta skips files outside that range.
    """
    from delta.tables import DeltaTable

    target = DeltaTable.forPath(spark, path)
    if set(primary_keys) == set(affected.keys):
        # One row per affected key at most: a key with no recomputed row is deleted, if the table has it.
        gone = affected.frame.select(*primary_keys)
    else:
        gone = affected.rows_of(spark.read.format("delta").load(path)).select(*primary_keys)
    # Materialized once, so the MERGE neither re-reads its own target nor recomputes the source per pass.
    source = merge_source(recomputed, gone, primary_keys).localCheckpoint(eager=True)

    match = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in primary_keys)
    value_columns = [c for c in recomputed.columns if c not in primary_keys]
    changed = " OR ".join(f"NOT (t.`{c}` <=> s.`{c}`)" for c in value_columns) or "false"
    assignments = {f"`{c}`": f"s.`{c}`" for c in recomputed.columns}

    with _transaction(spark, app_id, batch_id):
        (target.alias("t").merge(source.alias("s"), f"{match}{affected.prune}")
         .whenMatchedDelete(condition="s._delete")
         .whenMatchedUpdate(condition=f"NOT s._delete AND ({changed})", set=assignments)
         .whenNotMatchedInsert(condition="NOT s._delete", values=assignments)
         .execute())


def upsert_gold_keys(spark, path: str, gold: GoldTable, on_time: DataFrame, affected: KeySet | KeySpans,
                     settings: Settings, app_id: str, batch_id: int) -> None:
    """Recompute a gold table's ``affected`` keys (or key spans) from silver's on-time events (folded, for a table
    that folds), and make its rows equal to that."""
    if isinstance(affected, KeySpans):
        rows = affected.rows_of(gold.key_rows(on_time, settings), gold.sessions.time_column)
    else:
        if gold.windows is not None:
            on_time = affected.within_windows(on_time, gold.windows)
        rows = affected.rows_of(gold.key_rows(on_time, settings))
    upsert_recomputed(spark, path, gold.primary_keys, affected, folded(gold, gold.compute(rows, settings)), app_id,
                      batch_id)


def with_retries(action: Callable[[], T], what: str, retries: int = CONFLICT_RETRIES,
                 sleep: Callable[[float], None] = time.sleep) -> T:
    """Run ``action``; on a Delta commit conflict try again, up to ``retries`` times, backing off 1, 2, 4 s."""
    for attempt in range(retries):
        try:
            return action()
        except CONFLICTS as exc:
            log.warning("%s conflicted with a concurrent commit (%s); retry %d of %d", what, type(exc).__name__,
                        attempt + 1, retries)
            sleep(2 ** attempt)
    return action()
