"""Compaction of the stream's store, off the hot path: each gold table's tail folded into its base.

The stream appends every micro-batch's gold rows (partial rows of a fold, resets of a recomputed key) and never
rewrites them, so a gold view folds more rows with every batch. Compaction replaces, per gold table, the rows of
whole epochs the stream has finished with what they fold to: one row per primary key (a fold's partials merged,
without its output) or a key's latest reset (:func:`~spark_apps.pipeline.folds.compacted_query` says why every view
returns the same rows after it). Tiered (:func:`first_epoch_to_fold`): every finished epoch into one base, or only
the fresh epochs into a run of their own beside the base, which a tail of mostly new keys does not pay to rewrite.

Why it never conflicts with the running stream: it replaces whole partitions (``_kind`` = a table, ``_epoch`` in
the finished ones it folds) and the stream only appends to the epoch of its current batch or later; and its commit
is marked ``dataChange=false``, as an ``OPTIMIZE`` is, since no view's row changes. A run is one commit for every
table it folds, whose ``userMetadata`` says which batches each table's base now covers: a compaction killed half
way leaves every table as it was, every view unchanged, and the next run does it all. One commit, not one per
table: each commit made Delta build the store's next snapshot for the next table's write, about 1 s a table.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from spark_apps.core.settings import Settings
from spark_apps.io import delta_log, delta_snapshot, stream_store
from spark_apps.io.catalog import table_path
from spark_apps.io.catalog_locks import table_write
from spark_apps.io.delta_writes import with_retries
from spark_apps.io.fencing import file_lock
from spark_apps.io.spark_session import execution_for
from spark_apps.pipeline.folds import BATCH, EMPTY, RESET, compacted_query, q
from spark_apps.pipeline.target import Target
from spark_apps.transforms.store import COMPACTION, EPOCH, EPOCH_KEY, KIND, gold_column, gold_kind, gold_rows_query

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Compaction:
    """What compaction did to one gold table: the epochs it folded (all of them up to ``through_epoch``, or a
    segment after its base) and the newest batch among them, rows before and after, and the seconds of the run that
    did it (one commit for every table it folded)."""

    table: str
    from_epoch: int
    through_epoch: int
    through_batch: int
    rows_before: int
    rows_after: int
    seconds: float

    def line(self) -> str:
        return (f"{self.table:36s} compacted epochs {self.from_epoch}-{self.through_epoch} through batch "
                f"{self.through_batch}: {self.rows_before} rows -> {self.rows_after}, {self.seconds:.1f}s")


def compact(spark, settings: Settings, target: Target, tail_ratio: float = 0.0) -> list[Compaction]:
    """Compact every gold table of ``target``'s store through the last epoch the stream has finished: with a
    ``tail_ratio`` of 0 each into one file, a table whose finished epochs are one file already left alone; with
    another, whole or by a segment of its fresh epochs, as :func:`first_epoch_to_fold` decides. Returns what was
    done.

    One compaction of a store at a time (a lock file; another one finds it held and does nothing): each reads the
    store at a version and replaces what it read, so a second one reading before the first committed would put
    back rows the first already folded."""
    name = target.tables.store
    with file_lock(_lock_path(settings, name), wait=False) as held:
        if not held:
            log.info("compaction of %s: another compaction holds %s; nothing done", name, _lock_path(settings, name))
            return []
        return _compact(spark, settings, target, tail_ratio)


def _lock_path(settings: Settings, store: str) -> Path:
    return settings.run_dir / f"compaction-{store}.lock"


def _compact(spark, settings: Settings, target: Target, tail_ratio: float) -> list[Compaction]:
    """Compaction of the store as it is now, every table read through one view of it at its newest version: Delta
    builds the snapshot of a version anew for each query that names it (``VERSION AS OF``), about 0.8 s each on a
    store of a few hundred files, and once for a view of one DataFrame."""
    location = table_path(settings, target.tables.store)
    version = stream_store.latest_version(settings, target)
    pinned = spark.read.format("delta").option("versionAsOf", version).load(str(location))
    view = f"_compaction_of_{target.tables.store.replace('.', '_')}"
    pinned.createOrReplaceTempView(view)
    try:
        return _compact_at(spark, settings, target, tail_ratio, location, version, q(view),
                           stream_store.layout_of(target.pipeline, pinned.schema))
    finally:
        spark.catalog.dropTempView(view)


def _compact_at(spark, settings: Settings, target: Target, tail_ratio: float, location, version: int,
                relation: str, found: stream_store.StoreLayout) -> list[Compaction]:
    from pyspark.sql import functions as F

    newest = newest_epoch(spark, location, relation, version)
    if newest is None or newest == 0:
        log.info("compaction of %s: no finished epoch yet", target.tables.store)
        return []
    through = newest - 1
    stored = stream_store.as_stored(target.pipeline, found)
    tails = _tails(spark, location, relation, version, through)
    chosen = []
    for gold in stored.gold_tables:
        counts = tails.get(gold_kind(gold.name))
        first = None if counts is None else first_epoch_to_fold(counts, tail_ratio)
        if first is not None:
            chosen.append((gold, counts, first))
    if not chosen:
        return []
    started = time.monotonic()
    folding = sum(counts.rows_from(first) for _, counts, first in chosen)
    # A run over few rows runs interpreted, as a micro-batch does: compiling its window queries' code took more
    # of a run of 15,000 rows than running them.
    with execution_for(spark, folding):
        parts, replaced = [], []
        for gold, counts, first in chosen:
            kind, columns = gold_kind(gold.name), found.gold_columns[gold.name]
            epochs = f"{q(KIND)} = '{kind}' AND {q(EPOCH)} >= {first} AND {q(EPOCH)} <= {through}"
            replaced.append(f"({epochs})")
            rows = f"({gold_rows_query(f'(SELECT * FROM {relation} WHERE {epochs})', gold, columns)})"
            kept = spark.sql(compacted_query(rows, gold, columns, segment=first > min(counts.files_by_epoch)))
            written = kept.select(*[F.col(q(c)).alias(gold_column(gold.name, c)) for c in columns], F.col(BATCH),
                                  F.col(RESET), F.col(EMPTY), F.lit(kind).alias(KIND),
                                  F.lit(through).cast("long").alias(EPOCH))
            parts.append(written.select(*[(F.col(q(f.name)) if f.name in written.columns else F.lit(None))
                                          .cast(f.dataType).alias(f.name) for f in found.schema.fields]))
        written = functools.reduce(lambda a, b: a.unionByName(b), parts).coalesce(1).localCheckpoint(eager=True)
        after = {row[KIND]: row["count"] for row in written.groupBy(KIND).count().collect()}
        kinds = ", ".join(f"'{gold_kind(gold.name)}'" for gold, _, _ in chosen)
        covers = {COMPACTION: {"tables": {gold.name: counts.batch for gold, counts, _ in chosen},
                               "from_epochs": {gold.name: first for gold, _, first in chosen}, "through_epoch": through,
                               "read_version": version}}
        writer = (written.write.format("delta").mode("overwrite").option("replaceWhere", " OR ".join(replaced))
                  .option("dataChange", "false").option("userMetadata", json.dumps(covers)))
        with table_write(spark, settings, location, f"compaction of {kinds}"):
            with_retries(lambda: writer.save(str(location)), f"compaction of {kinds}")
    seconds = time.monotonic() - started
    done = [Compaction(target.tables.gold(gold.name), first, through, counts.batch, counts.rows_from(first),
                       after.get(gold_kind(gold.name), 0), seconds) for gold, counts, first in chosen]
    for result in done:
        log.info("%s", result.line())
    return done


def newest_epoch(spark, location, relation: str, version: int) -> int | None:
    """The epoch of the newest micro-batch in the store at ``version``, from its commit's ``userMetadata`` (a batch
    commit names its epoch): read from the log, not by a query that opens every file of the store. A store whose
    batches did not name their epoch yet is asked by a query."""
    for commit in delta_log.commits(location):
        if commit.version > version:
            continue
        if EPOCH_KEY in commit.meta:
            return int(commit.meta[EPOCH_KEY])
        if "batch_id" in commit.meta:
            break
    return spark.sql(f"SELECT max({q(EPOCH)}) FROM {relation}").first()[0]


# What one file costs a full scan, in rows of a gold table: Spark's Parquet reader spends about 5 ms on a file
# whatever it holds, and about 2.6 us on a row (a scan of 672,723 rows of ``order_status`` took 1.76 s), on 2 cores
# (docs/scaling.md). A tail of small files is thus slow to read for its files, not for its rows.
FILE_ROWS = 2_000


@dataclass(frozen=True)
class Tail:
    """A gold table's rows in the epochs compaction may fold: per epoch its rows and files, and the newest batch
    among them. A tail of one file has nothing to gain: it is what a compaction wrote, or one batch's rows."""

    rows_by_epoch: dict[int, int]
    files_by_epoch: dict[int, int]
    batch: int

    @property
    def files(self) -> int:
        return sum(self.files_by_epoch.values())

    def rows_from(self, epoch: int) -> int:
        """Its rows in ``epoch`` and the epochs after it."""
        return sum(rows for e, rows in self.rows_by_epoch.items() if e >= epoch)


def _tails(spark, location, relation: str, version: int, through: int) -> dict[str, Tail]:
    """Every gold table's :class:`Tail` through epoch ``through``, by kind, from the store's log at ``version``:
    each file's partition values and row count are in the ``add`` action that made it live. A log this reader cannot
    follow (``io.delta_snapshot``) is left to a query, which opens every file of the finished epochs."""
    import pyarrow

    try:
        return tails_of(delta_snapshot.file_stats(location, version), through)
    except (delta_snapshot.Unreadable, OSError, ValueError, KeyError, pyarrow.ArrowException) as exc:
        log.info("compaction of %s: counting its tails by a query, the log does not say (%s)", location, exc)
    return tails_by_query(spark, relation, through)


def tails_by_query(spark, relation: str, through: int) -> dict[str, Tail]:
    """What :func:`tails_of` finds in the log, by a query over the files of the finished epochs."""
    found: dict[str, Tail] = {}
    for row in spark.sql(f"SELECT {q(KIND)} AS kind, {q(EPOCH)} AS epoch, count(*) AS rows, "
                         f"count(DISTINCT _metadata.file_path) AS files, max({q(BATCH)}) AS batch "
                         f"FROM {relation} WHERE {q(KIND)} LIKE 'gold.%' AND {q(EPOCH)} <= {int(through)} "
                         f"GROUP BY {q(KIND)}, {q(EPOCH)}").collect():
        found[row["kind"]] = _with(found.get(row["kind"]), int(row["epoch"]), int(row["rows"]), int(row["files"]),
                                   int(row["batch"]))
    return found


def tails_of(files: list[delta_snapshot.FileStats], through: int) -> dict[str, Tail]:
    """The gold tables' tails through epoch ``through``, by kind, from the store's live files."""
    found: dict[str, Tail] = {}
    for file in files:
        kind, epoch = file.partition.get(KIND) or "", file.partition.get(EPOCH)
        if not kind.startswith("gold.") or epoch is None or int(epoch) > through:
            continue
        if file.max_values.get(BATCH) is None:
            raise delta_snapshot.Unreadable(f"no largest {BATCH} for {file.path}")
        found[kind] = _with(found.get(kind), int(epoch), file.records, 1, int(file.max_values[BATCH]))
    return found


def _with(tail: Tail | None, epoch: int, rows: int, files: int, batch: int) -> Tail:
    had = tail or Tail({}, {}, -1)
    return Tail({**had.rows_by_epoch, epoch: had.rows_by_epoch.get(epoch, 0) + rows},
                {**had.files_by_epoch, epoch: had.files_by_epoch.get(epoch, 0) + files}, max(had.batch, batch))


# A table's tail may hold this many single-file runs (each a folded segment, or an epoch of one file) before the
# next compaction folds them into one with the fresh epochs: each costs a full scan about 5 ms.
MAX_RUNS = 8


def first_epoch_to_fold(tail: Tail, tail_ratio: float) -> int | None:
    """The first epoch compaction folds of a table whose finished epochs are ``tail`` (through the newest of them),
    or None: nothing worth it. Tiered, as Paimon's universal compaction is: the oldest epoch is the table's base.

    - A ratio of 0 folds every epoch into one (the DAG's run and ``kappa compact``), unless that is one file already.
    - All of them too once the tail, folded, would cost a full scan at least ``tail_ratio`` times the base, folded
      (a file costing ``FILE_ROWS``), so that a scan of the table costs about ``1 + tail_ratio`` times a compacted
      one: a small table, or a tail grown large beside its base.
    - Otherwise only the epochs after the newest run (an epoch of one file) are folded, into one run of their own,
      and the base is not read: its cost stays out of a run whose tail is mostly new keys. Once the runs reach
      ``MAX_RUNS``, every epoch after the base is folded into one run.
    - A lone epoch is left alone (folding it onto nothing only shrinks it, which the DAG's run still does)."""
    epochs = sorted(tail.files_by_epoch)
    if tail.files <= 1:
        return None
    if tail_ratio == 0:
        return epochs[0]
    base, after = epochs[0], epochs[1:]
    if not after:
        return None
    runs = [e for e in after if tail.files_by_epoch[e] == 1]
    # Both sides as they would read once folded: a base of many files (never compacted yet) is one file more than
    # its rows, not many, or it would hide a tail as large as itself.
    if tail.rows_from(after[0]) + FILE_ROWS * (len(runs) + 1) >= tail_ratio * (tail.rows_by_epoch[base] + FILE_ROWS):
        return base
    if len(runs) >= MAX_RUNS:
        return after[0]
    fresh = [e for e in after if e > max(runs, default=base)]
    return fresh[0] if sum(tail.files_by_epoch[e] for e in fresh) > 1 else None
