"""The Lambda side: recompute every stream table from exactly the log prefix a stream version reflects.

The batch never reads the stream's bronze: it reads Kafka itself, ``[stream start, O)``, and applies
the very functions the stream applies (parse, validate, dedup, lateness, every gold compute) to
everything at once. Each result is written as a ``batch.*`` snapshot tagged with ``O``, the run id
and the code version, so reconciliation can compare it with the stream table at version ``V``.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field

from spark_apps.alerts.alert import Alert, runbook
from spark_apps.alerts.dispatch import raise_alert, resolve
from spark_apps.core.errors import PlatformError
from spark_apps.core.object_path import Location
from spark_apps.core.progress import phase_times, timed
from spark_apps.core.settings import Settings
from spark_apps.io import delta_log
from spark_apps.io.catalog import existing_table_path, register_table, table_path
from spark_apps.io.catalog_locks import table_write
from spark_apps.io.delta_writes import MERGE_TARGET_PROPERTIES, commit_metadata
from spark_apps.io.lineage import StreamPosition, position_at
from spark_apps.io.log_reader import read_log_range
from spark_apps.io.parallel_writes import write_in_parallel
from spark_apps.io.stream_store import read_view
from spark_apps.pipeline.declaration import Pipeline
from spark_apps.pipeline.determinism import assert_deterministic
from spark_apps.pipeline.provenance import pipeline_version
from spark_apps.pipeline.target import Target
from spark_apps.transforms.events import (
    COORDINATES,
    WINNER_POSITION,
    winner_position,
    with_high_water,
)
from spark_apps.transforms.parsing import REASON_COLUMN, parse_records
from spark_apps.transforms.store import flagged_records, gold_rows, on_time_winners

log = logging.getLogger(__name__)
SNAPSHOT_SCHEMA = "batch"


class RetentionError(PlatformError):
    """The log no longer holds every record the stream consumed, so no exact recompute is possible."""


@dataclass(frozen=True)
class StreamTable:
    """One table the stream maintains that the auditor reconciles, as the auditor sees it.

    ``label`` is its name without the replay generation: it names the snapshot and the expectation suite. The
    stream's side of it is a view of the store (``transforms.store``)."""

    label: str
    stream: str
    snapshot: str
    keys: tuple[str, ...]


def stream_tables(target: Target) -> list[StreamTable]:
    """The tables a reconciliation compares: ``bronze.events_raw`` (every record, every column: parse, dead
    letters, lateness and winners) and every gold table.

    The other views of the store (dead letters, candidates, events, late events, duplicates) are the same SQL over
    bronze on both sides (``transforms.store``): bronze equal row for row makes them equal."""
    base, named = target.pipeline.tables(), target.tables
    tables = [StreamTable(base.bronze, named.bronze, f"{SNAPSHOT_SCHEMA}.events_raw", COORDINATES)]
    return tables + [StreamTable(base.gold(g.name), named.gold(g.name), f"{SNAPSHOT_SCHEMA}.{g.name}", g.primary_keys)
                     for g in target.pipeline.gold_tables]


def read_stream_table(spark, settings: Settings, target: Target, table: StreamTable, versions: dict[str, int]):
    """The stream's side of ``table``: its view of the store at the version of one alignment."""
    return read_view(spark, settings, target, table.stream, versions[table.stream])


def bronze_equivalent(records):
    """What the batch keeps of each record: every column, the key and value as their SHA-256.

    Applied to the batch's records and to the stream's bronze, it compares every byte ingested without storing the
    payloads twice."""
    from pyspark.sql import functions as F

    hashed = {"key": F.sha2(F.col("key"), 256).alias("key_sha256"),
              "value": F.sha2(F.col("value"), 256).alias("value_sha256")}
    return records.select(*[hashed.get(c, F.col(f"`{c}`")) for c in records.columns])


# ---- which stream versions, which offsets ---------------------------------------------------------

@dataclass(frozen=True)
class Alignment:
    """The stream batch being audited, its log prefix, and the version of each stream table that reflects it."""

    position: StreamPosition
    versions: dict[str, int]


def version_for_batch(path: Location, app_id: str, batch_id: int) -> int:
    """The newest version of the store that no later micro-batch of ``app_id`` has written: the version just
    before that app's commit of a later batch, or the newest version when there is none.

    Commits that are not the stream's (OPTIMIZE, VACUUM, maintenance's compaction, the table's creation) carry no
    batch, change no row of any view, and never decide the answer: an OPTIMIZE after batch 7 does not reflect batch
    5. Auditing the latest batch needs only the newest commits, and they are read first (``io.delta_log``: one file
    each, no Spark job).
    """
    answer = None
    for commit in delta_log.commits(path):
        answer = commit.version if answer is None else answer
        meta = commit.meta
        if "batch_id" not in meta:
            continue
        if meta.get("app_id") == app_id and meta["batch_id"] > batch_id:
            answer = commit.version - 1
            continue
        return answer
    if answer is None or answer < 0:
        raise PlatformError(f"{path} has no version at or before batch {batch_id} of {app_id}")
    return answer


def align(spark, settings: Settings, target: Target, table: str | None = None, version: int | None = None,
          as_of: dt.datetime | None = None) -> Alignment:
    """Pick the stream batch to audit: the one ``table`` at ``version`` reflects (every stream table is a view of
    the store, so a version of one is the store's), else the last one committed (by ``as_of``, when given: a
    scheduled run for a given hour audits the same batch however late it runs)."""
    store = table_path(settings, target.tables.store)
    if not delta_log.has_commits(store):
        raise PlatformError(f"pipeline {target.name!r} has no stream tables in {settings.warehouse_dir}; "
                            "run `kappa stream` first")
    if table is not None:
        path = store if table in target.stream_table_names() else existing_table_path(settings, table)
        anchor = position_at(path, version)
    else:
        pinned = None if as_of is None else _version_at(spark, str(store), as_of)
        commits = read_view(spark, settings, target, target.tables.commits, pinned)
        last = commits.orderBy("batch_id", ascending=False).first()
        if last is None:
            raise PlatformError(f"the stream of {target.name!r} has not committed a micro-batch yet")
        anchor = position_at(store, version_for_batch(store, last["app_id"], last["batch_id"]))
    return Alignment(position=anchor, versions=table_versions(settings, target, anchor))


def _version_at(spark, path: str, as_of: dt.datetime) -> int:
    """The newest version of a Delta table committed at or before ``as_of``."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    cutoff = as_of.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    found = (DeltaTable.forPath(spark, path).history().where(F.col("timestamp") <= F.lit(cutoff).cast("timestamp"))
             .agg(F.max("version")).first()[0])
    if found is None:
        raise PlatformError(f"the stream had committed no micro-batch by {as_of.isoformat()}")
    return found


def table_versions(settings: Settings, target: Target, position: StreamPosition) -> dict[str, int]:
    """Per stream table, the version that reflects exactly the batch of ``position``: the store's, which every
    one of them is a view of."""
    store = table_path(settings, target.tables.store)
    version = version_for_batch(store, position.app_id, position.batch_id)
    return dict.fromkeys(target.stream_table_names(), version)


def check_log_complete(spark, settings: Settings, topic: str, source: str, what: str) -> None:
    """Refuse (and alert) unless every partition of ``topic`` still starts at offset 0: what a rebuild from the
    whole log (a replay) needs, or it would be built, and reconciled "exact", from a log that lost its head."""
    from spark_apps.io.topics import partition_offsets

    available = partition_offsets(settings, topic)
    whole = StreamPosition(table_version=-1, app_id="", batch_id=-1, topic=topic,
                           start_offsets={p: 0 for p in available},
                           end_offsets={p: latest for p, (_, latest) in available.items()})
    check_retention(spark, settings, whole, source, what)


def check_retention(spark, settings: Settings, position: StreamPosition, source: str,
                    what: str = "batch recompute") -> None:
    """Refuse (and alert) unless the log still holds every offset from the stream's start to ``O``."""
    from spark_apps.io.topics import partition_offsets

    available = partition_offsets(settings, position.topic)
    problems = []
    for partition, end in sorted(position.end_offsets.items()):
        start = position.start_offsets.get(partition, 0)
        if end <= start:
            continue
        if partition not in available:
            problems.append(f"partition {partition} is gone (needed [{start},{end}))")
            continue
        earliest, latest = available[partition]
        if earliest > start:
            problems.append(f"partition {partition} lost offsets [{start},{min(earliest, end)}) "
                            f"(log starts at {earliest})")
        if latest < end:
            problems.append(f"partition {partition} ends at {latest}, before {end}")
    if not problems:
        resolve(settings, retention_key(position.topic), source,
                f"{position.topic} holds every offset the stream consumed again", spark)
        return
    summary = (f"{what} of {position.topic} refused: the log no longer holds what the stream "
               f"consumed: {'; '.join(problems)}")
    raise_alert(spark, settings, Alert(
        severity="critical", summary=summary, source=source, dedup_key=retention_key(position.topic),
        offsets=position.end_offsets, details={"problems": problems, "start_offsets": position.start_offsets},
        runbook=runbook("log-retention")))
    raise RetentionError(summary + "; restore the topic's retention (retention.ms=-1) and replay from a "
                         "backup, or rebuild the stream from what remains with a Kappa replay")


def retention_key(topic: str) -> str:
    """The incident of a log that lost offsets the stream consumed: open until a check finds them all again."""
    return f"retention:{topic}"


# ---- recompute --------------------------------------------------------------------------------------

@dataclass
class Snapshot:
    """One batch recompute: where its tables are and how long each phase took."""

    run_id: str
    position: StreamPosition
    code_version: str
    versions: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    records: int = 0


def derive_tables(parsed, pipeline: Pipeline, settings: Settings, materialize=lambda df: df) -> dict:
    """Every reconciled table's batch equivalent, by label, from all parsed records of the prefix: the records with
    their flags (late by the pipeline's rule, the winner of their id by ``winner_position`` over the whole prefix)
    and every gold table's rows (``transforms.store.gold_rows``).

    The same functions the stream applies per micro-batch, applied once to everything."""
    from pyspark.sql import functions as F

    schema = pipeline.schema
    labels = pipeline.tables()
    lateness = pipeline.lateness_rule(settings)
    marked = with_high_water(parsed, schema.time_field, lateness)
    first = marked.groupBy(schema.id_field).agg(
        winner_position(F.col(REASON_COLUMN).isNull()).alias(WINNER_POSITION))
    records = materialize(flagged_records(marked, first, pipeline, lateness))
    on_time = on_time_winners(records, pipeline, lateness)
    assert_deterministic(pipeline, on_time, settings)
    frames = {labels.bronze: bronze_equivalent(records)}
    for gold in pipeline.gold_tables:
        frames[labels.gold(gold.name)] = materialize(gold_rows(gold, on_time, settings))
    return frames


def recompute(spark, settings: Settings, target: Target, alignment: Alignment, run_id: str) -> Snapshot:
    """Rebuild the stream tables from the log prefix ``O`` and write them as tagged ``batch.*`` snapshots."""
    pipeline, position = target.pipeline, alignment.position
    check_retention(spark, settings, position, source=f"batch recompute {run_id}")
    snapshot = Snapshot(run_id=run_id, position=position, code_version=pipeline_version(pipeline))
    log.info("batch recompute %s: reading %s from Kafka", run_id, position.describe())
    with timed(snapshot.seconds, "read"):
        start = {p: position.start_offsets.get(p, 0) for p in position.end_offsets}
        raw = read_log_range(spark, settings, position.topic, start, position.end_offsets)
        parsed = parse_records(raw, pipeline.schema).localCheckpoint(eager=True)
        snapshot.records = parsed.count()
    with timed(snapshot.seconds, "compute"):
        frames = derive_tables(parsed, pipeline, settings, materialize=lambda df: df.localCheckpoint(eager=True))
    tag = {"kind": "batch_snapshot", "run_id": run_id, "pipeline": pipeline.name, "topic": position.topic,
           "stream_app_id": position.app_id, "stream_batch_id": position.batch_id,
           "start_offsets": {str(p): o for p, o in sorted(start.items())},
           "end_offsets": {str(p): o for p, o in sorted(position.end_offsets.items())},
           "code_version": snapshot.code_version}

    def overwrite(table: StreamTable):
        def write(session) -> int:
            path = table_path(settings, table.snapshot)
            with table_write(session, settings, path, f"the batch snapshot of run {run_id}"):
                frames[table.label].write.format("delta").mode("overwrite").option("overwriteSchema", "true") \
                    .options(**MERGE_TARGET_PROPERTIES).save(str(path))
            register_table(session, settings, table.snapshot)
            return delta_log.latest_version(path)
        return write

    # Every snapshot table comes from the frames above, none from another's write: they are written at once.
    writes: dict[str, float] = {}  # per snapshot table: where the write phase goes, in the log
    with timed(snapshot.seconds, "write"), commit_metadata(spark, tag):
        written = write_in_parallel(spark, {table.snapshot: overwrite(table) for table in stream_tables(target)},
                                    writes)
    snapshot.versions.update(written)
    log.info("batch recompute %s: write %s", run_id, phase_times(writes))
    log.info("batch recompute %s: %d records of %s in %s", run_id, snapshot.records, position.describe(),
             phase_times(snapshot.seconds))
    return snapshot
