"""One gold key, traced from the verdict back to the log: what on-call runs after a mismatch.

For the reconciliation that last compared the table (or a given run), it shows the stream's row and the batch's row
side by side, the log records that feed the key on each side (event id, partition, offset, append time, whether each
is its id's winner, a duplicate of it or a conflicting copy, and whether it was late), the stream's micro-batch that
last wrote the key (its store version and offsets), and any write to the store after that which was not the
stream's: the usual answer to "why does the stream differ".
"""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from spark_apps.audit import ledger
from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import Settings
from spark_apps.io import delta_log
from spark_apps.io.catalog import read_if_present, read_version, table_path
from spark_apps.io.stream_store import read_view
from spark_apps.pipeline.target import Target
from spark_apps.transforms.store import COMPACTION

EVENTS_SHOWN = 200
# Commits of the store that change no row a view shows (compaction's say which batches they cover).
_QUIET = {"OPTIMIZE", "VACUUM START", "VACUUM END", "CREATE TABLE", "SET TBLPROPERTIES", "CHANGE COLUMN"}
WINNER_ROLE, DUPLICATE_ROLE, CONFLICT_ROLE = "winner", "duplicate", "conflict"


@dataclass(frozen=True)
class FeedingEvent:
    event_id: str
    partition: int
    offset: int
    appended: dt.datetime | None
    role: str  # winner, duplicate (same payload as its id's winner) or conflict (another payload)
    late: bool


@dataclass(frozen=True)
class StreamWrite:
    batch_id: int
    app_id: str
    version: int | None
    start_offsets: dict[int, int]
    end_offsets: dict[int, int]


@dataclass
class Explanation:
    table: str
    key: dict[str, str]
    run_id: str
    stream_table: str
    stream_version: int
    snapshot_table: str
    snapshot_version: int | None
    stream_rows: list[dict] = field(default_factory=list)
    batch_rows: list[dict] = field(default_factory=list)
    stream_events: list[FeedingEvent] = field(default_factory=list)
    batch_events: list[FeedingEvent] = field(default_factory=list)
    last_write: StreamWrite | None = None
    outside_writes: list[tuple[int, str]] = field(default_factory=list)

    def lines(self) -> list[str]:
        return explanation_lines(self)


def explain_command(pipeline: str, table: str, key: Mapping[str, str]) -> str:
    """The command that explains one key, as a report shows it beside each differing key."""
    keys = " ".join(f"--key {shlex.quote(f'{column}={value}')}" for column, value in key.items())
    return f"kappa explain --pipeline {shlex.quote(pipeline)} --table {table} {keys}"


def parse_key(given: list[str], primary_keys: tuple[str, ...], table: str) -> dict[str, str]:
    """``column=value`` arguments as the table's key, every primary key column once."""
    key: dict[str, str] = {}
    for item in given:
        column, sep, value = item.partition("=")
        if not sep or not column:
            raise PlatformError(f"--key {item!r}: give column=value")
        key[column.strip()] = value
    if set(key) != set(primary_keys):
        raise PlatformError(f"{table} is keyed by {', '.join(primary_keys)}; got {', '.join(key) or 'no key'}")
    return {column: key[column] for column in primary_keys}


# ---- I/O ------------------------------------------------------------------------------------------------------------

def explain(spark, settings: Settings, target: Target, table: str, given_key: list[str],
            run_id: str | None = None) -> Explanation:
    """Trace one key of the gold table ``table`` (``gold.<name>``) through the reconciliation ``run_id`` (default: the
    newest one of the served generation's table)."""
    pipeline, names = target.pipeline, target.tables
    gold = next((g for g in pipeline.gold_tables if pipeline.tables().gold(g.name) == table), None)
    if gold is None:
        known = ", ".join(pipeline.tables().gold(g.name) for g in pipeline.gold_tables)
        raise PlatformError(f"{table} is not a gold table of {pipeline.name} ({known})")
    key = parse_key(given_key, gold.primary_keys, table)
    row, bronze = _ledger_rows(spark, settings, target, table, run_id)
    found = Explanation(table, key, row["run_id"], row["stream_table"], int(row["stream_version"]),
                        row["snapshot_table"], row["snapshot_version"])
    stream = read_view(spark, settings, target, names.gold(gold.name), found.stream_version)
    found.stream_rows = _rows(_where_key(stream, key))
    if found.snapshot_version is not None:
        batch = read_version(spark, settings, found.snapshot_table, found.snapshot_version)
        found.batch_rows = _rows(_where_key(batch, key))
    stream_bronze = read_view(spark, settings, target, names.bronze, found.stream_version)
    found.stream_events = _feeding(stream_bronze, gold, key, pipeline, settings)
    if bronze is not None and bronze["snapshot_version"] is not None:
        batch_bronze = read_version(spark, settings, bronze["snapshot_table"], bronze["snapshot_version"])
        found.batch_events = _feeding(batch_bronze, gold, key, pipeline, settings)
    found.last_write = _last_write(spark, settings, target, gold.name, key, row)
    found.outside_writes = outside_writes(
        table_path(settings, names.store), found.last_write.version if found.last_write else None,
        found.stream_version)
    return found


def _ledger_rows(spark, settings: Settings, target: Target, table: str, run_id: str | None):
    """The ledger's row of ``table`` in the run (the newest that reconciled the served table, by default), and the
    same run's row of bronze."""
    from pyspark.sql import functions as F

    rows = read_if_present(spark, settings, ledger.LEDGER_TABLE)
    if rows is None:
        raise PlatformError(f"no reconciliation of {target.pipeline.name} yet: run `kappa reconcile` first")
    stream_table = target.tables.gold(table.split(".", 1)[1])
    mine = rows.where((F.col("pipeline") == target.pipeline.name) & (F.col("table") == table)
                      & (F.col("stream_table") == stream_table))
    if run_id is not None:
        mine = mine.where(F.col("run_id") == run_id)
    row = mine.orderBy(F.col("started_at").desc()).first()
    if row is None:
        raise PlatformError(f"no reconciliation of {stream_table}" + (f" in run {run_id}" if run_id else "")
                            + ": run `kappa reconcile` first")
    bronze = rows.where((F.col("run_id") == row["run_id"]) & (F.col("table") == target.pipeline.tables().bronze)) \
        .first()
    return row, bronze


def _where_key(frame, key: Mapping[str, str]):
    """Rows whose key columns equal ``key``'s values, each value read as its column's type."""
    from pyspark.sql import functions as F

    types = dict(frame.dtypes)
    condition = None
    for column, value in key.items():
        if column not in types:
            continue
        test = F.col(f"`{column}`") == F.lit(value).cast(types[column])
        condition = test if condition is None else condition & test
    return frame if condition is None else frame.where(condition)


def _rows(frame) -> list[dict]:
    return [row.asDict(recursive=True) for row in frame.limit(20).collect()]


def _feeding(bronze, gold, key: Mapping[str, str], pipeline, settings: Settings) -> list[FeedingEvent]:
    """The valid records of ``bronze`` that the gold table's ``key_rows`` puts under ``key`` (on the key columns it
    gives), with their role among the copies of their event id."""
    from pyspark.sql import functions as F

    from spark_apps.transforms.parsing import FINGERPRINT_COLUMN, REASON_COLUMN
    from spark_apps.transforms.store import LATE, WINNER

    identity = pipeline.schema.id_field
    candidates = bronze.where(F.col(REASON_COLUMN).isNull())
    keyed = _where_key(gold.key_rows(candidates, settings), key)
    needed = {identity, "partition", "offset", "log_append_time", WINNER, LATE, FINGERPRINT_COLUMN}
    if not needed <= set(keyed.columns):
        return []
    picked = keyed.select(*sorted(needed)).limit(EVENTS_SHOWN).collect()
    ids = sorted({r[identity] for r in picked})
    winners = {r[identity]: r[FINGERPRINT_COLUMN] for r in
               candidates.where(F.col(identity).isin(ids) & F.col(WINNER)).select(identity, FINGERPRINT_COLUMN)
               .collect()} if ids else {}
    return sorted((FeedingEvent(str(r[identity]), int(r["partition"]), int(r["offset"]), r["log_append_time"],
                                role(bool(r[WINNER]), r[FINGERPRINT_COLUMN], winners.get(r[identity])),
                                bool(r[LATE])) for r in picked), key=lambda e: (e.partition, e.offset))


def _last_write(spark, settings: Settings, target: Target, name: str, key: Mapping[str, str],
                row) -> StreamWrite | None:
    """The newest micro-batch, up to the audited one, whose rows in the store hold the key."""
    from pyspark.sql import functions as F

    from spark_apps.pipeline.folds import BATCH
    from spark_apps.transforms.store import KIND, gold_column, gold_kind

    store = table_path(settings, target.tables.store)
    rows = read_version(spark, settings, target.tables.store, row["stream_version"])
    renamed = rows.where(F.col(KIND) == gold_kind(name)).select(
        F.col(BATCH).alias("batch_id"), *[F.col(gold_column(name, c)).alias(c) for c in key])
    batch = _where_key(renamed, key).agg(F.max("batch_id")).first()[0]
    if batch is None:
        return None
    commits = read_view(spark, settings, target, target.tables.commits, int(row["stream_version"])) \
        .where(F.col("batch_id") == batch).collect()
    commit = next((c for c in commits if c["app_id"] == row["stream_app_id"]), commits[0] if commits else None)
    app_id = commit["app_id"] if commit else row["stream_app_id"]
    return StreamWrite(int(batch), app_id, batch_version(store, app_id, int(batch)),
                       dict(commit["start_offsets"]) if commit else {}, dict(commit["end_offsets"]) if commit else {})


def batch_version(store: Path, app_id: str, batch_id: int) -> int | None:
    """The store's version the stream's commit of ``batch_id`` made (its ``userMetadata`` names it)."""
    for commit in delta_log.commits(store):
        meta = commit.meta
        if meta.get("batch_id") == batch_id and meta.get("app_id") == app_id:
            return commit.version
    return None


def outside_writes(store: Path, after: int | None, through: int) -> list[tuple[int, str]]:
    """Commits of the store in ``(after, through]`` that are neither the stream's micro-batches nor maintenance."""
    found = []
    for commit in delta_log.commits(store):
        if commit.version > through:
            continue
        if after is not None and commit.version <= after:
            break
        if "batch_id" not in commit.meta and COMPACTION not in commit.meta and commit.operation not in _QUIET:
            found.append((commit.version, commit.operation))
    return sorted(found)


# ---- pure -----------------------------------------------------------------------------------------------------------

def role(winner: bool, fingerprint: str | None, winner_fingerprint: str | None) -> str:
    if winner:
        return WINNER_ROLE
    return DUPLICATE_ROLE if fingerprint is not None and fingerprint == winner_fingerprint else CONFLICT_ROLE


def explanation_lines(found: Explanation) -> list[str]:
    key = ", ".join(f"{c}={v}" for c, v in found.key.items())
    lines = [f"{found.table} {key}: reconciliation {found.run_id} compared {found.stream_table} version "
             f"{found.stream_version} with {found.snapshot_table} version {found.snapshot_version}"]
    lines += side_by_side(found.stream_rows, found.batch_rows)
    lines.append("")
    lines += event_lines(found.stream_events, found.batch_events)
    lines.append("")
    write = found.last_write
    if write is None:
        lines.append("no micro-batch of the stream wrote this key")
    else:
        spans = ", ".join(f"p{p}=[{write.start_offsets.get(p, 0)},{o})" for p, o in sorted(write.end_offsets.items()))
        lines.append(f"last written by the stream's batch {write.batch_id} (app {write.app_id}, store version "
                     f"{write.version if write.version is not None else 'unknown'}, offsets {spans})")
    if found.outside_writes:
        writes = ", ".join(f"version {v} {op or 'unnamed'}" for v, op in found.outside_writes)
        lines.append(f"after it, the store changed by writes that are not the stream's: {writes}")
    else:
        lines.append("after it, no write but the stream's changed the store up to the audited version")
    return lines


def side_by_side(stream: list[dict], batch: list[dict]) -> list[str]:
    """The stream's row and the batch's, one column per line, differing values marked."""
    if not stream and not batch:
        return ["neither side has a row for this key"]
    if len(stream) > 1 or len(batch) > 1:
        return [f"stream: {row}" for row in stream] + [f"batch:  {row}" for row in batch]
    left, right = (stream or [{}])[0], (batch or [{}])[0]
    columns = [*left, *(c for c in right if c not in left)]
    width = max(len(c) for c in columns)
    lines = [f"{'':{width}}  {'stream':32s} batch"]
    for column in columns:
        one = _cell(left, column) if stream else "(no row)"
        other = _cell(right, column) if batch else "(no row)"
        lines.append(f"{column:{width}}  {one:32s} {other}" + ("   <- differs" if one != other else ""))
    return lines


def _cell(row: dict, column: str) -> str:
    return str(row[column]) if column in row else "-"


def event_lines(stream: list[FeedingEvent], batch: list[FeedingEvent]) -> list[str]:
    """The records that feed the key, once each: on both sides alike, or on one side only."""
    if not stream and not batch:
        return ["no record of the log feeds this key on either side"]
    on_stream = {(e.partition, e.offset): e for e in stream}
    on_batch = {(e.partition, e.offset): e for e in batch}
    lines = [f"{len(on_stream)} record(s) feed it in the stream, {len(on_batch)} in the batch:",
             f"  {'side':7s} {'event id':24s} {'partition':>9s} {'offset':>10s}  {'appended (UTC)':26s} "
             f"{'role':10s} late"]
    for place in sorted({*on_stream, *on_batch}):
        one, other = on_stream.get(place), on_batch.get(place)
        shown = [("both", one)] if one == other else [("stream", one), ("batch", other)]
        for side, event in shown:
            if event is None:
                continue
            appended = f"{event.appended:%Y-%m-%d %H:%M:%S.%f}"[:-3] if event.appended else "-"
            lines.append(f"  {side:7s} {event.event_id:24s} {event.partition:>9d} {event.offset:>10d}  "
                         f"{appended:26s} {event.role:10s} {'yes' if event.late else 'no'}")
    return lines
