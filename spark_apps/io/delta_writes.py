"""Idempotent Delta writes: every commit of a micro-batch may be replayed any number of times.

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
from dataclasses import dataclass
from pathlib import Path
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

from spark_apps.io import delta_log
from spark_apps.io.key_sets import KeySet, KeySpans

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
# A batch's own commit is among a table's newest ones: only maintenance (OPTIMIZE, VACUUM) commits in between.
BATCH_COMMIT_LOOKBACK = 20
# Set on every table a MERGE rewrites, when it is created. With deletion vectors a MERGE marks the rows it replaces
# and writes only those, instead of copying every other row of the files they sit in: at 1M-event tables a gold
# MERGE of about 20 keys copied up to 457,000 rows (6-11 s); with the vectors it copies none (3.5-4 s). A table
# created before keeps its protocol: turning them on upgrades it past older readers, so that is the owner's call.
DELETION_VECTORS = "delta.enableDeletionVectors"
MERGE_TARGET_PROPERTIES = {DELETION_VECTORS: "true"}
# A gold table starts with the vectors supported but off. While a table is small, rewriting the few small
# files a MERGE's keys sit in costs less than marking its rows: 40 upserts into the 342 rows of a gold table took
# 1.1-1.9 s in 8 Spark jobs without them and 2.0-4.8 s in 15 with them, and a 4 MB table in one file came out even
# (docs/scaling.md). ``deletion_vectors_once_large`` turns them on when the table reaches
# ``KAPPA_DELETION_VECTORS_MIN_BYTES``, for good; being supported from the start, that changes no protocol.
GOLD_TABLE_PROPERTIES = {"delta.feature.deletionVectors": "supported", DELETION_VECTORS: "false"}
# Delta writes a table's checkpoint inside the commit whose version is a multiple of ``delta.checkpointInterval``
# (10 by default). Every stream table commits once per micro-batch, so at one interval they would all write it in
# the same batch, every tenth one (about 6 s on top of a 12 s small batch). Each table gets its own interval instead.
FIRST_CHECKPOINT_INTERVAL = 10
# Marks the recomputed rows in ``merge_source``'s outer join, apart from the keys it adds to delete.
RECOMPUTED = "_recomputed"


def staggered_checkpoints(tables: list[str]) -> dict[str, dict[str, str]]:
    """Per table, the property that gives it its own checkpoint interval (10, 11, 12, ... in the given order), so
    the tables' checkpoints fall in different micro-batches and each still replays at most a few more commits."""
    return {table: {"delta.checkpointInterval": str(FIRST_CHECKPOINT_INTERVAL + position)}
            for position, table in enumerate(tables)}


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


def append_once(df: DataFrame, path: str, app_id: str, batch_id: int, replayed: bool) -> None:
    """Append a micro-batch's rows once, inside ``commit_metadata`` that names the batch.

    Delta's own check (``idempotent_append``) rebuilds the table's whole state to read the transaction versions it
    recorded: three Spark jobs and about 0.6 s per append on two cores, every batch. Only a batch planned before
    this run started can be a replay, so only one that may be (``replayed``) looks for its own commit among the
    table's newest ones (``batch_commit``, by the ``app_id`` and ``batch_id`` its commit carries) and appends when
    there is none; any other appends at once. A crash between two appends of a batch leaves the same state either
    way, and one instance writes per checkpoint (``io.fencing``)."""
    if replayed and batch_commit(path, app_id, batch_id) is not None:
        log.info("batch %d: already appended to %s by an earlier attempt; skipped", batch_id, path)
        return
    df.write.format("delta").mode("append").save(path)


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


def merge_earliest(spark, path: str, keys: KeySet, rows: DataFrame, earlier: str, app_id: str,
                   batch_id: int) -> int | None:
    """Keep, per key, whichever row comes first: insert a row whose key is new, replace a row when the new one is
    ``earlier`` (SQL over ``s``, the new row, and ``t``, the table's), leave it otherwise. Merging the first row of
    each batch gives the first row of all of them, without reading the earlier rows back.

    Returns how many rows it replaced, from the MERGE's own result; None when Delta skipped it because an earlier
    attempt of this batch committed it (then only that commit knows)."""
    from delta.tables import DeltaTable

    match = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in keys.keys)
    assignments = {f"`{c}`": f"s.`{c}`" for c in rows.columns}
    with _transaction(spark, app_id, batch_id):
        result = (DeltaTable.forPath(spark, path).alias("t").merge(rows.alias("s"), f"{match}{keys.prune}")
                  .whenMatchedUpdate(condition=earlier, set=assignments)
                  .whenNotMatchedInsert(values=assignments)
                  .execute()).collect()
    return int(result[0]["num_updated_rows"]) if result else None


@dataclass(frozen=True)
class BatchCommit:
    """The commit one micro-batch made to a table: its version and Delta's operation metrics."""

    version: int
    metrics: dict[str, str]


def batch_commit(path: str, app_id: str, batch_id: int) -> BatchCommit | None:
    """The commit of (app id, batch id) to the table, from its newest commits (a batch looks for its own right after
    making it, or after an earlier attempt made it); None when the batch made none."""
    for commit in delta_log.commits(Path(path), BATCH_COMMIT_LOOKBACK):
        meta = commit.meta
        if meta.get("app_id") == app_id and meta.get("batch_id") == batch_id:
            return BatchCommit(commit.version, commit.metrics)
    return None


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
    """Recompute a gold table's ``affected`` keys (or key spans) from silver's on-time events, and make its rows
    equal to that."""
    if isinstance(affected, KeySpans):
        rows = affected.rows_of(gold.key_rows(on_time, settings), gold.sessions.time_column)
    else:
        if gold.windows is not None:
            on_time = affected.within_windows(on_time, gold.windows)
        rows = affected.rows_of(gold.key_rows(on_time, settings))
    upsert_recomputed(spark, path, gold.primary_keys, affected, gold.compute(rows, settings), app_id, batch_id)


def deletion_vectors_once_large(spark, path: str, min_bytes: int) -> bool:
    """Turn deletion vectors on for the table at ``path`` once it holds at least ``min_bytes``, as its newest checksum
    file says (no Spark job); True when this call turned them on. Never off again: a table that grew large rarely
    shrinks, and its compacted files are what a MERGE without them would copy. A commit that fails (a conflict
    past the retries) leaves them off, said in the log: the table is only slower to MERGE."""
    checksum = delta_log.newest_checksum(Path(path))
    if not checksum or int(checksum.get("tableSizeBytes") or 0) < min_bytes:
        return False
    if str(((checksum.get("metadata") or {}).get("configuration") or {}).get(DELETION_VECTORS)).lower() == "true":
        return False
    try:
        with_retries(lambda: spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('{DELETION_VECTORS}' = 'true')")
                     .collect(), f"turning deletion vectors on for {path}")
    except Exception as exc:  # noqa: BLE001 - the table only stays slower to MERGE: no stream start may fail on it
        log.warning("deletion vectors for %s stay off until the next stream start or maintenance: %s", path,
                    str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        return False
    log.info("%s holds %d bytes: its MERGEs mark rows with deletion vectors from now on", path,
             int(checksum["tableSizeBytes"]))
    return True


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
