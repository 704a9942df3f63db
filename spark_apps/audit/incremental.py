"""The incremental audit: extend the batch side's last verified snapshot by the log's new records, compare what changed.

A full run recomputes every ``batch.*`` table from the whole log ``[start, O₂)``. Once a run has verified the stream
at ``O₁`` (stream == batch at every table), a later run at ``O₂`` needs only:

1. the batch side, extended by the batch code path: the records ``[O₁, O₂)`` read from Kafka, parsed and validated,
   appended to bronze, dead letters and candidates; the winner of each event id they touch recomputed by
   :func:`winners` over its earlier winner and its new records (the earliest record in the log wins, so that is the
   winner over all of them); every gold key their on-time records or the winners they displaced belong to
   recomputed from the extended events, by the gold table's own function. Nothing is read from the stream's tables.
2. the comparison, on the keys that can differ: the keys the new records touch on the batch side, and the keys of
   every row the stream wrote since the versions the base run verified (the rows of the files its commits added),
   plus every table's whole row count on both sides (a row the stream only deleted shows there).

Everything else is equal on both sides because the base run proved it and neither side has changed it since. A
full run still comes on its own schedule (``KAPPA_FULL_AUDIT_EVERY_S``, daily by default) and after any change of
code, and a table moves to kappa serving only with a full run in its streak (``serving.state``).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from dataclasses import dataclass

from spark_apps.audit import ledger
from spark_apps.audit.recompute import (
    Alignment,
    Snapshot,
    bronze_equivalent,
    check_retention,
    stream_tables,
)
from spark_apps.core.errors import PlatformError
from spark_apps.core.progress import phase_times, timed
from spark_apps.core.settings import Settings
from spark_apps.core.version import same_code
from spark_apps.io import delta_log
from spark_apps.io.catalog import read_if_present, table_path
from spark_apps.io.catalog_locks import table_write
from spark_apps.io.delta_changes import HistoryGone, files_added, rows_added
from spark_apps.io.delta_writes import commit_metadata, idempotent_append, upsert_gold_keys, upsert_recomputed
from spark_apps.io.key_sets import fixed_changes, key_set
from spark_apps.io.lineage import StreamPosition
from spark_apps.io.log_reader import read_log_range
from spark_apps.io.parallel_writes import in_parallel, write_in_parallel
from spark_apps.pipeline.provenance import pipeline_version
from spark_apps.pipeline.target import Target
from spark_apps.transforms.events import (
    COORDINATES,
    WINNER_POSITION,
    at_position,
    gold_changes,
    gold_keys_touched,
    high_water_marks,
    rows_of_keys,
    touched_keys,
    winner_position,
    with_high_water,
)
from spark_apps.transforms.parsing import REASON_COLUMN, parse_records
from spark_apps.transforms.sessions import extends_sessions, sessions_after
from spark_apps.transforms.store import (
    DISPLACED,
    EPOCH,
    KIND,
    LATE,
    RECORD,
    WINNER,
    candidate_columns,
    flagged_records,
    gold_column,
    gold_kind,
    on_time_winners,
)

log = logging.getLogger(__name__)
AUTO = "auto"
KINDS = (ledger.FULL, ledger.INCREMENTAL, AUTO)


@dataclass(frozen=True)
class Base:
    """The verified run an incremental run extends: its log prefix, and the versions it proved equal."""

    run_id: str
    end_offsets: dict[int, int]
    records: int
    snapshot_versions: dict[str, int]  # batch.* table -> the version the run verified
    stream_versions: dict[str, int]  # stream table -> the version the run verified


@dataclass(frozen=True)
class Plan:
    """What kind of run this is, on which base, and why (printed and kept in the report)."""

    kind: str
    reason: str
    base: Base | None = None


@dataclass(frozen=True)
class Scope:
    """The rows of one table an incremental run compares: those whose ``columns`` are among ``keys``.

    ``empty``: no key at all, so no row of the table can have changed since the base run (neither new records nor a
    write of the stream reached it); comparing it would compare nothing."""

    columns: tuple[str, ...]
    keys: object  # a DataFrame of distinct key rows
    empty: bool = False
    bounds: str = ""  # SQL the keys satisfy, that Delta's file statistics can skip by


@dataclass(frozen=True)
class Extension:
    snapshot: Snapshot
    scopes: dict[str, Scope]


def choose(requested: str, base: Base | None, why_no_base: str, last_full_at: dt.datetime | None,
           as_of: dt.datetime, full_every_s: float) -> Plan:
    """Pure: incremental when asked (or, for ``auto``, when the last full run is recent enough) and a base exists;
    otherwise full, saying why."""
    if requested == ledger.FULL:
        return Plan(ledger.FULL, "a full run was asked for")
    if base is None:
        return Plan(ledger.FULL, f"no verified run to build on: {why_no_base}")
    if requested == AUTO:
        if last_full_at is None:
            return Plan(ledger.FULL, "no full run yet")
        age = as_of.timestamp() - last_full_at.timestamp()
        if age >= full_every_s:
            return Plan(ledger.FULL, f"the last full run is {age:.0f}s old (a full run every {full_every_s:.0f}s)")
    return Plan(ledger.INCREMENTAL, f"builds on verified run {base.run_id}", base)


def plan(spark, settings: Settings, target: Target, alignment: Alignment, requested: str,
         only: list[str] | None, as_of: dt.datetime | None) -> Plan:
    if requested not in KINDS:
        raise PlatformError(f"audit kind must be one of {', '.join(KINDS)}, got {requested!r}")
    if requested == ledger.FULL:
        return choose(requested, None, "", None, dt.datetime.now(dt.UTC), settings.full_audit_every_s)
    if only:
        if requested == ledger.INCREMENTAL:
            raise PlatformError("an incremental audit extends every snapshot table; it cannot take --only")
        return Plan(ledger.FULL, "--only audits a subset of tables, which no later run can build on")
    newest, last_full_at = _ledger_facts(spark, settings, target.name)
    base, why = _base(settings, target, alignment, newest)
    outcome = choose(requested, base, why, last_full_at, as_of or dt.datetime.now(dt.UTC),
                     settings.full_audit_every_s)
    if requested == ledger.INCREMENTAL and outcome.kind != ledger.INCREMENTAL:
        raise PlatformError(f"no incremental audit possible: {why}; run a full one (--kind full)")
    return outcome


def _ledger_facts(spark, settings: Settings, pipeline: str) -> tuple[list[dict], dt.datetime | None]:
    """The rows of the pipeline's newest run (one per table; none before the first run), and the moment its last
    full run stood for."""
    from pyspark.sql import functions as F

    recorded = read_if_present(spark, settings, ledger.LEDGER_TABLE)
    if recorded is None:
        return [], None
    rows = recorded.where(F.col("pipeline") == pipeline)
    kind = F.coalesce(F.col("kind"), F.lit(ledger.FULL)) if "kind" in rows.columns else F.lit(ledger.FULL)
    last_full_at = rows.where(kind == ledger.FULL).agg(F.max(F.coalesce("as_of", "started_at"))).first()[0]
    newest = rows.orderBy(F.col("finished_at").desc(), F.col("run_id").desc()).select("run_id").first()
    if newest is None:
        return [], last_full_at
    return [r.asDict() for r in rows.where(F.col("run_id") == newest["run_id"]).collect()], last_full_at


def _base(settings: Settings, target: Target, alignment: Alignment, newest: list[dict]) -> tuple[Base | None, str]:
    """The newest run, if it can be extended to ``alignment``: it succeeded on every table with this code, over the
    same log from the same start, to a prefix of this one, and the snapshots are still as it verified them."""
    if not newest:
        return None, "the ledger has no run"
    rows = {r["table"]: r for r in newest}
    position = alignment.position
    tables = stream_tables(target)
    first = newest[0]
    problem = None
    if not all(r["success"] for r in newest):
        problem = "it did not succeed"
    elif not same_code(first["code_version"], pipeline_version(target.pipeline)):
        problem = f"it ran code {first['code_version']}, this is {pipeline_version(target.pipeline)}"
    elif first["topic"] != position.topic or _starts(first["start_offsets"]) != _starts(position.start_offsets):
        problem = "it audited another log or another start"
    elif any(o > position.end_offsets.get(p, 0) for p, o in first["end_offsets"].items()):
        problem = "it audited a later prefix of the log"
    elif any(t.label not in rows or rows[t.label]["stream_table"] != t.stream for t in tables):
        problem = "it did not reconcile every table of this generation"
    elif any(rows[t.label]["stream_version"] > alignment.versions[t.stream] for t in tables):
        problem = "it verified later stream versions"
    if problem is None:
        problem = _unchanged_since(settings, target, tables, rows, alignment)
    if problem:
        return None, f"the newest run {first['run_id']}: {problem}"
    contract = next(r for r in newest if r["stream_table"] == "")
    return Base(run_id=first["run_id"], end_offsets=dict(first["end_offsets"]), records=contract["batch_rows"],
                snapshot_versions={t.snapshot: rows[t.label]["snapshot_version"] for t in tables},
                stream_versions={t.stream: rows[t.label]["stream_version"] for t in tables}), ""


def _unchanged_since(settings: Settings, target: Target, tables: list, rows: dict,
                     alignment: Alignment) -> str | None:
    """Why the run's snapshots or the stream's history since it cannot be built on, or None."""
    for t in tables:
        if delta_log.latest_version(table_path(settings, t.snapshot)) != rows[t.label]["snapshot_version"]:
            return f"{t.snapshot} changed after it"
    store = table_path(settings, target.tables.store)
    bronze = target.tables.bronze
    try:
        files_added(store, rows[target.pipeline.tables().bronze]["stream_version"], alignment.versions[bronze])
    except HistoryGone as gone:
        return str(gone)
    return None


def _starts(offsets: dict) -> dict[int, int]:
    return {int(p): int(o) for p, o in (offsets or {}).items() if o}


def extend(spark, settings: Settings, target: Target, alignment: Alignment, base: Base, run_id: str) -> Extension:
    """Extend the batch snapshots from ``base`` by the records ``[O₁, O₂)``, and scope the comparison."""
    from pyspark.sql import functions as F

    pipeline = target.pipeline
    position = alignment.position
    new_span = StreamPosition(position.table_version, position.app_id, position.batch_id, position.topic,
                              {p: base.end_offsets.get(p, position.start_offsets.get(p, 0))
                               for p in position.end_offsets}, position.end_offsets)
    check_retention(spark, settings, new_span, source=f"incremental batch recompute {run_id}")
    snapshot = Snapshot(run_id=run_id, position=position, code_version=pipeline_version(pipeline))
    schema, rule = pipeline.schema, pipeline.lateness_rule(settings)
    labels = pipeline.tables()
    key = (schema.id_field,)
    snapshots = {t.label: t.snapshot for t in stream_tables(target)}
    location = {label: table_path(settings, snapshot) for label, snapshot in snapshots.items()}
    path = {label: str(found) for label, found in location.items()}
    valid = F.col(REASON_COLUMN).isNull()

    def verified(label: str):
        return spark.read.format("delta").option("versionAsOf", base.snapshot_versions[snapshots[label]]) \
            .load(path[label])

    log.info("incremental batch recompute %s: reading %s from Kafka (builds on %s)", run_id, new_span.describe(),
             base.run_id)
    with timed(snapshot.seconds, "read"):
        raw = read_log_range(spark, settings, position.topic, new_span.start_offsets, position.end_offsets)
        parsed = parse_records(raw, schema).localCheckpoint(eager=True)
        new_records = parsed.count()
        snapshot.records = base.records + new_records
    with timed(snapshot.seconds, "compute"):
        bronze_before = verified(labels.bronze)
        marks = ({int(r["partition"]): int(r["mark"])
                  for r in high_water_marks(bronze_before.where(valid), schema.time_field, rule).collect()}
                 if rule.uses_high_water_mark else None)
        marked = with_high_water(parsed, schema.time_field, rule, marks).localCheckpoint(eager=True)
        ids = key_set(touched_keys(marked.where(valid), key), key, in_driver=False)
        # The verified winners of the ids the new records touch: the winner over all of an id's records is the
        # earliest of its verified winner and its new records.
        earlier = ids.rows_of(bronze_before.where(F.col(WINNER))).localCheckpoint(eager=True)
        positions = (marked.where(valid).select(*key, "partition", "offset")
                     .unionByName(earlier.select(*key, "partition", "offset"))
                     .groupBy(*key).agg(winner_position(F.lit(True)).alias(WINNER_POSITION)))
        new_rows = bronze_equivalent(flagged_records(marked, positions, pipeline, rule)).localCheckpoint(eager=True)
        displaced = (earlier.join(positions, list(key))
                     .where(~at_position(F.col(WINNER_POSITION))).drop(WINNER_POSITION).localCheckpoint(eager=True))
    tag = {"kind": "batch_snapshot", "audit": ledger.INCREMENTAL, "builds_on": base.run_id, "run_id": run_id,
           "pipeline": pipeline.name, "topic": position.topic,
           "end_offsets": {str(p): o for p, o in sorted(position.end_offsets.items())},
           "code_version": snapshot.code_version}
    columns = [*candidate_columns(pipeline, rule), LATE]
    new_on_time = new_rows.where(valid & ~F.col(LATE)).select(*columns)
    lost = displaced.where(~F.col(LATE)).select(*columns)
    added = on_time_winners(new_rows, pipeline, rule)
    touched = new_on_time.unionByName(lost)
    scopes = {labels.bronze: Scope(COORDINATES, new_rows.select(*COORDINATES).unionByName(
        displaced.select(*COORDINATES)))}
    writes: dict[str, float] = {}  # per snapshot table: where the write phase goes, in the log
    # No new record changes no snapshot: the verified run's versions stand, and nothing is written (an idle hour's
    # audit then costs its comparison of what the stream wrote since).
    with timed(snapshot.seconds, "write"), commit_metadata(spark, tag):
        if new_records:
            with timed(writes, snapshots[labels.bronze]), \
                    table_write(spark, settings, location[labels.bronze], f"the batch snapshot of run {run_id}"):
                idempotent_append(new_rows, path[labels.bronze], run_id, 0)
                if not displaced.isEmpty():
                    _no_longer_winners(spark, path[labels.bronze], displaced, run_id)
            # Gold reads the winners just written; no gold table reads another, so they are written at once.
            on_time = (spark.read.format("delta").load(path[labels.bronze]).where(F.col(WINNER) & ~F.col(LATE))
                       .select(*columns))
            lost_rows = None if lost.isEmpty() else lost

            def upsert(gold):
                def write(session):
                    with table_write(session, settings, location[labels.gold(gold.name)],
                                     f"the batch snapshot of run {run_id}"):
                        return upsert_keys(session, gold)
                return write

            def upsert_keys(session, gold):
                target = path[labels.gold(gold.name)]
                changes = gold_changes(gold, touched, lambda: session.read.format("delta").load(target), settings)
                affected = fixed_changes(gold, changes, in_driver=False)
                if extends_sessions(gold):
                    extended = sessions_after(gold, session.read.format("delta").load(target), added, lost_rows,
                                              on_time, affected.rows_of, settings)
                    upsert_recomputed(session, target, gold.primary_keys, affected, extended, run_id, 0)
                else:
                    upsert_gold_keys(session, target, gold, on_time, affected, settings, run_id, 0)
                return affected.frame.select(*gold.recompute_keys)

            affected = write_in_parallel(spark, {labels.gold(g.name): upsert(g) for g in pipeline.gold_tables},
                                         writes)
        else:
            affected = {labels.gold(g.name): gold_keys_touched(g, touched, settings) for g in pipeline.gold_tables}
        for gold in pipeline.gold_tables:
            label = labels.gold(gold.name)
            scopes[label] = Scope(gold.recompute_keys, affected[label])
        for label, name in snapshots.items():
            snapshot.versions[name] = (delta_log.latest_version(location[label]) if new_records
                                       else base.snapshot_versions[name])
    log.info("incremental batch recompute %s: write %s", run_id, phase_times(writes))
    with timed(snapshot.seconds, "scope"):
        scopes = _with_stream_changes(spark, settings, target, alignment, base, scopes)
    log.info("incremental batch recompute %s: %d new records (log prefix %d) in %s", run_id, new_records,
             snapshot.records, phase_times(snapshot.seconds))
    return Extension(snapshot, scopes)


def _no_longer_winners(spark, path: str, displaced, run_id: str) -> None:
    """Turn off the winner flag of the verified records that new records displaced (the same id earlier in the
    log): in the batch's bronze, as the stream's bronze view turns off the flag of a winner it lists as
    displaced."""
    from delta.tables import DeltaTable

    match = " AND ".join(f"t.`{c}` = s.`{c}`" for c in COORDINATES)
    (DeltaTable.forPath(spark, path).alias("t").merge(displaced.select(*COORDINATES).alias("s"), match)
     .whenMatchedUpdate(set={f"`{WINNER}`": "false"}).execute())
    log.info("incremental batch recompute %s: %d verified winners displaced", run_id, displaced.count())


def _with_stream_changes(spark, settings: Settings, target: Target, alignment: Alignment, base: Base,
                         scopes: dict[str, Scope]) -> dict[str, Scope]:
    """Add to each table's scope the keys of every row the stream wrote to its store since the version ``base``
    verified (records and displaced winners for bronze; each gold table's rows for it), so a stray write to a key
    the new records do not touch is compared too."""
    from pyspark.sql import functions as F

    labels, names = target.pipeline.tables(), target.tables
    store = table_path(settings, names.store)
    after, through = base.stream_versions[names.bronze], alignment.versions[names.bronze]

    def written(kind: str):
        return rows_added(spark, store, after, through, partition=(KIND, kind), other_partitions=(EPOCH,))

    # A displaced row names a record of the pipeline's one topic by its partition and offset.
    extra = {labels.bronze: [written(RECORD).select(*COORDINATES), written(DISPLACED).select(
        F.lit(alignment.position.topic).alias("topic"), "partition", "offset")]}
    for gold in target.pipeline.gold_tables:
        rows = written(gold_kind(gold.name))
        extra[labels.gold(gold.name)] = [rows.select(*[rows[gold_column(gold.name, k)].alias(k)
                                                       for k in gold.recompute_keys])]
    # Each widening is a few small queries; run at once, they keep both cores busy.
    return in_parallel(spark, {label: functools.partial(_widened, scope, extra.get(label, []))
                               for label, scope in scopes.items()})


def _widened(scope: Scope, more: list) -> Scope:
    """``scope`` with the key rows of ``more`` added, fixed as a checkpoint, with ``bounds``: the tables are appended
    in log order, so a read restricted to keys that grow with the log skips every older file. Log coordinates get
    their offset range per partition, other keys each column's range (``io.key_sets``)."""
    from pyspark.sql import functions as F

    keys = scope.keys.select(*scope.columns)
    for frame in more:
        keys = keys.unionByName(frame)
    keys = keys.dropna().distinct()
    if scope.columns != COORDINATES:
        fixed = key_set(keys, scope.columns, in_driver=False)
        return Scope(scope.columns, fixed.frame, empty=not fixed.ranges, bounds=fixed.bounds)
    keys = keys.localCheckpoint(eager=True)
    ranges = keys.groupBy("partition").agg(F.min("offset").alias("lo"), F.max("offset").alias("hi")).collect()
    bounds = " OR ".join(f"(`partition` = {int(r['partition'])} AND `offset` BETWEEN {int(r['lo'])} AND {int(r['hi'])})"
                         for r in sorted(ranges, key=lambda r: r["partition"]))
    return Scope(scope.columns, keys, empty=not ranges, bounds=f"({bounds})" if bounds else "")


def restrict(frame, scope: Scope):
    """Only the rows of ``frame`` inside ``scope``; its ``bounds`` come first, so the read skips files outside them
    (every row of the keys satisfies them)."""
    return rows_of_keys(frame.where(scope.bounds) if scope.bounds else frame, scope.keys, scope.columns)
