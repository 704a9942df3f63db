"""The Lambda auditor: recompute from the log, reconcile every stream table, record the verdict.

One run: align on a stream batch (its offsets ``O`` and each table's version ``V``), recompute the
``batch.*`` snapshots from Kafka ``[start, O)`` (a full run) or extend the last verified ones by the records since
(an incremental run, ``audit.incremental``), diff each stream table against its snapshot, run the GX suites, check
the record-count contract, append the ledger and write the HTML report.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from spark_apps.alerts.alert import Alert, runbook
from spark_apps.alerts.dispatch import raise_alert, resolve
from spark_apps.audit import incremental, ledger
from spark_apps.audit.diff import EXTRA, MISMATCH, MISSING, TableDiff, diff_table
from spark_apps.audit.expectations import SuiteOutcome, Validator
from spark_apps.audit.recompute import (
    Snapshot,
    StreamTable,
    align,
    bronze_equivalent,
    read_stream_table,
    recompute,
    stream_tables,
    table_versions,
)
from spark_apps.audit.verdict import AuditRun, ContractCheck, TableVerdict
from spark_apps.core.errors import PlatformError
from spark_apps.core.progress import phase_times
from spark_apps.core.settings import Settings
from spark_apps.io.catalog import read_version
from spark_apps.io.parallel_writes import in_parallel
from spark_apps.io.spark_session import INTERPRETED_MAX_RECORDS, execution_for
from spark_apps.pipeline.target import Target
from spark_apps.transforms.store import RECORD_COUNTS, record_counts

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")
CONTRACT_LABEL = "contract.record_counts"
# A full run over at most this many log records diffs the next table while GX validates one, as an incremental run
# does: its queries are small, and one at a time they leave a core idle.
DIFF_AHEAD_MAX_RECORDS = INTERPRETED_MAX_RECORDS


def new_run_id() -> str:
    return f"{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def audit(spark, settings: Settings, target: Target, table: str | None = None, version: int | None = None,
          only: list[str] | None = None, run_id: str | None = None, as_of: dt.datetime | None = None,
          kind: str = ledger.FULL) -> AuditRun:
    """Recompute the snapshots for the chosen stream batch (``kind``: full, incremental, or auto to choose), then
    reconcile against them."""
    alignment = align(spark, settings, target, table, version, as_of)
    run_id = run_id or new_run_id()
    _selected(target, only)  # an unknown table name fails before the expensive recompute
    chosen = incremental.plan(spark, settings, target, alignment, kind, only, as_of)
    log.info("audit %s: %s run (%s)", run_id, chosen.kind, chosen.reason)
    if chosen.base is None:
        with execution_for(spark, alignment.position.records):
            snapshot = recompute(spark, settings, target, alignment, run_id)
            return compare_with_snapshot(spark, settings, target, snapshot, only,
                                         versions=alignment.versions, run_id=run_id, as_of=as_of,
                                         kind_reason=chosen.reason)
    with execution_for(spark, alignment.position.records - chosen.base.records):
        extension = incremental.extend(spark, settings, target, alignment, chosen.base, run_id)
        return compare_with_snapshot(spark, settings, target, extension.snapshot,
                                     versions=alignment.versions, run_id=run_id, as_of=as_of,
                                     scopes=extension.scopes, base=chosen.base, kind_reason=chosen.reason)


def _selected(target: Target, only: list[str] | None) -> list[StreamTable]:
    tables = stream_tables(target)
    if only:
        unknown = sorted(set(only) - {t.label for t in tables})
        if unknown:
            raise PlatformError(f"pipeline {target.name!r} has no stream table {', '.join(unknown)}; "
                                f"its tables: {', '.join(t.label for t in tables)}")
        tables = [t for t in tables if t.label in only]
    return tables


def compare_with_snapshot(spark, settings: Settings, target: Target, snapshot: Snapshot,
                          only: list[str] | None = None, versions: dict[str, int] | None = None,
                          run_id: str | None = None, as_of: dt.datetime | None = None,
                          scopes: dict[str, incremental.Scope] | None = None, base: incremental.Base | None = None,
                          kind_reason: str = "") -> AuditRun:
    """Compare each stream table, at the version reflecting the snapshot's batch, with the snapshot.

    ``versions`` (stream table -> version) defaults to the newest versions reflecting that batch; a
    reconciliation that reuses an earlier snapshot gets its own ``run_id``. ``scopes`` (an incremental run) limit
    the row comparison of each table to the keys that can have changed since the verified run ``base``; every
    table's whole row count is then compared too.
    """
    from pyspark.util import inheritable_thread_target

    from spark_apps.audit.report import write_report

    started = dt.datetime.now(dt.UTC)
    pipeline = target.pipeline
    run = AuditRun(run_id=run_id or new_run_id(), pipeline=pipeline.name, position=snapshot.position, snapshot=snapshot,
                   started_at=started, seconds=dict(snapshot.seconds), as_of=as_of,
                   kind=ledger.INCREMENTAL if scopes is not None else ledger.FULL,
                   builds_on=base.run_id if base else "",
                   kind_reason=kind_reason)
    versions = versions or table_versions(settings, target, snapshot.position)
    validator = Validator(settings, pipeline.name)
    compare_s = validate_s = 0.0
    tables = _selected(target, only)
    skipped = {t.label for t in tables if scopes is not None and scopes[t.label].empty}

    def release(compared_table: tuple) -> None:
        """Free the cached frames of a compared table: ``(stream, batch)`` or ``(stream, batch, diff)``."""
        for frame in compared_table[:2]:
            frame.unpersist()

    def compared(table: StreamTable) -> tuple[object, object, TableDiff]:
        stream = read_stream_table(spark, settings, target, table, versions)
        if table.label == pipeline.tables().bronze:
            stream = bronze_equivalent(stream)
        batch = read_version(spark, settings, table.snapshot, snapshot.versions[table.snapshot])
        if scopes is not None:
            scope = scopes[table.label]
            stream, batch = incremental.restrict(stream, scope), incremental.restrict(batch, scope)
        # Both sides are scanned by the fingerprint diff and then by every expectation: read each table once.
        stream, batch = stream.persist(), batch.persist()
        try:
            return stream, batch, diff_table(table.label, stream, batch, table.keys, settings.reconcile_buckets)
        except BaseException:
            release((stream, batch))
            raise

    to_compare = [t for t in tables if t.label not in skipped]
    # An incremental run's queries cover a few keys each and leave a core idle between them, so the next table is
    # diffed while GX validates one (1M-event bench: its compare-and-validate loop 29 -> 26 s); so do a small full
    # run's (a full audit of 400 events, warm, alone: 29.6-31.1 -> 24.6-27.9 s). A large full run's work over whole
    # tables keeps both cores busy already: at once, the two only contend (the same loop 73 -> 82 s).
    ahead = (_one_ahead(spark, compared, to_compare, release)
             if scopes is not None or snapshot.records <= DIFF_AHEAD_MAX_RECORDS
             else contextlib.nullcontext(map(compared, to_compare)))
    count_rows = functools.partial(_row_counts, spark, settings, target, snapshot, versions, scopes=scopes)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit-counts") as counter, ahead as diffs:
        # An incremental run's whole-table counts need no verdict: they are taken while the tables are compared,
        # whose queries of a few keys each leave a core idle.
        counting = counter.submit(inheritable_thread_target(spark)(count_rows)) if scopes is not None else None
        for table in tables:
            if table.label in skipped:
                # No key in scope: the diff and every expectation would see zero rows on both sides, and pass.
                why = f"nothing to compare: no new record and no stream write reached it since run {run.builds_on}"
                log.info("%s: %s", table.label, why)
                run.verdicts.append(TableVerdict(table, versions[table.stream], snapshot.versions[table.snapshot],
                                                 TableDiff(table.label, table.keys),
                                                 SuiteOutcome(f"{pipeline.name}.{table.label}", True, ""), why))
                continue
            stream, batch, diff = next(diffs)
            try:
                compare_s += diff.seconds
                began = time.monotonic()
                outcome = validator.validate(spark, table.label, stream, batch, table.keys)
                validate_s += time.monotonic() - began
            finally:
                release((stream, batch, diff))
            log.info("%s: compared in %.1fs, validated in %.1fs", table.label, diff.seconds,
                     time.monotonic() - began)
            run.verdicts.append(TableVerdict(table, versions[table.stream], snapshot.versions[table.snapshot],
                                             diff, outcome))
        began = time.monotonic()
        counts = counting.result() if counting else count_rows()
    run.contract = _contract(target, snapshot, counts, whole=scopes is not None)
    run.seconds.update(compare=compare_s + time.monotonic() - began, validate=validate_s)
    run.docs_url = validator.publish()
    run.report_path = write_report(settings, run)
    ledger.append(spark, settings, _ledger_rows(run, dt.datetime.now(dt.UTC)))
    for verdict in run.verdicts:
        if verdict.gx.quality_ok:
            resolve(settings, quality_key(run.pipeline, verdict.table.label), f"reconciliation ({run.pipeline})",
                    f"every data-quality rule holds in reconciliation {run.run_id}", spark)
        else:
            raise_alert(spark, settings, quality_alert(run, verdict))
    return run


@contextlib.contextmanager
def _one_ahead(spark, compare: Callable[[T], R], items: list[T], release: Callable[[R], None],
               ) -> Iterator[Iterator[R]]:
    """``compare`` of each item in order, each computed in a thread while the caller works on the one before: GX's
    validation of one table runs its small queries while the next table is read and diffed, so two cores do two
    things at once. At most two results are held at a time; one the caller never took is ``release``d."""
    from pyspark.util import inheritable_thread_target

    work = inheritable_thread_target(spark)(compare)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit-diff") as pool:
        pending = [pool.submit(work, items[0])] if items else []

        def results() -> Iterator[R]:
            for following in range(1, len(items) + 1):
                result = pending.pop().result()
                if following < len(items):
                    pending.append(pool.submit(work, items[following]))
                yield result

        try:
            yield results()
        finally:
            for future in pending:  # the caller stopped early (a failure): free what the one ahead holds
                if not future.cancel() and future.exception() is None:
                    release(future.result())


def quality_key(pipeline: str, table: str) -> str:
    """The incident of a table that breaks its data-quality rules: open until an audit finds them all holding."""
    return f"quality:{pipeline}:{table}"


def quality_alert(run: AuditRun, verdict: TableVerdict) -> Alert:
    """A table that breaks its own data-quality rules: its own page, apart from a mismatch (stream and batch may
    well agree on wrong data), naming each failing rule and a few rows it caught."""
    failing = [e for e in verdict.gx.expectations if not e.success and not e.compares_with_batch]
    label = verdict.table.label
    rules = "; ".join(f"{e.description} ({e.observed})" + (f", e.g. {' | '.join(e.samples)}" if e.samples else "")
                      for e in failing)
    agreement = "stream and batch agree" if verdict.stream_equals_batch else "stream and batch also differ"
    return Alert(
        severity="critical",
        summary=f"{label}: data-quality rules failed in reconciliation {run.run_id} ({agreement}): {rules}",
        source=f"reconciliation ({run.pipeline})",
        dedup_key=quality_key(run.pipeline, label),
        table=label,
        offsets=dict(run.position.end_offsets),
        versions={verdict.table.stream: verdict.version},
        details={"run_id": run.run_id, "stream_equals_batch": verdict.stream_equals_batch,
                 "failing": [{"expectation": e.description, "observed": e.observed, "samples": list(e.samples)}
                             for e in failing],
                 "gx_result": verdict.gx.result_url, "report": str(run.report_path or "")},
        runbook=runbook("data-quality"),
    )


def summary_lines(run: AuditRun) -> list[str]:
    """What the CLI and the demo print: one line per table and per count equation, then where to look."""
    lines = [f"reconciliation {run.run_id} ({run.kind}: {run.kind_reason or 'the whole log'}): "
             f"{run.position.describe()}"]
    for v in run.verdicts:
        d = v.diff
        verdict = ("MATCH" if v.stream_equals_batch else "MISMATCH") + ("" if v.gx.quality_ok else " QUALITY-FAILED")
        lines.append(f"{v.table.label:28s} {verdict:8s} stream v{v.version} vs batch v{v.snapshot_version}: "
                     f"{d.stream_rows:,} vs {d.batch_rows:,} rows, matched {d.matched:,}, "
                     f"missing {d.counts[MISSING]:,}, extra {d.counts[EXTRA]:,}, "
                     f"mismatched {d.counts[MISMATCH]:,}; {len(d.differing_buckets)}/{len(d.buckets)} "
                     "buckets differ" + (f"; {v.not_compared}" if v.not_compared else ""))
    for check in run.contract:
        lines.append(f"{'counts':28s} {'HOLDS' if check.ok else 'BROKEN':8s} {check.name}: "
                     f"{check.left:,} vs {check.right:,}")
    if run.code_note:
        lines.append(f"{'code':28s} {'DIFFERS':8s} {run.code_note}")
    lines.append("time: " + phase_times(run.seconds))
    lines.append(f"report: {run.report_path}")
    lines.append(f"data docs: {run.docs_url}")
    return lines


def _row_counts(spark, settings: Settings, target: Target, snapshot: Snapshot, versions: dict[str, int],
               scopes: dict[str, incremental.Scope] | None = None,
               counted: dict[tuple[str, str], int] | None = None) -> dict[tuple[str, str], int]:
    """The counts the contract needs, by ``(side, name)`` at the versions compared, all taken at once: on each side
    the records of bronze by what they became (``record_counts``: one query a side), and in an incremental run
    (``scopes``) every reconciled table's whole row count, ``counted`` where known already."""
    counted = counted or {}
    tables = {s.stream: s for s in stream_tables(target)}
    bronze = tables[target.tables.bronze]

    def stream_rows(name: str) -> int:
        return read_stream_table(spark, settings, target, tables[name], versions).count()

    def batch_rows(name: str) -> int:
        return read_version(spark, settings, tables[name].snapshot, snapshot.versions[tables[name].snapshot]).count()

    def tallied(side: str):
        frame = read_stream_table(spark, settings, target, bronze, versions) if side == "stream" \
            else read_version(spark, settings, bronze.snapshot, snapshot.versions[bronze.snapshot])
        return {(side, name): int(value) for name, value in record_counts(frame).first().asDict().items()}

    work = {("tally", side): functools.partial(tallied, side) for side in ("stream", "batch")}
    if scopes is not None:
        work |= {("stream", name): functools.partial(stream_rows, name) for name in tables}
        work |= {("batch", name): functools.partial(batch_rows, name) for name in tables}
    done = in_parallel(spark, {key: call for key, call in work.items() if key not in counted}, workers=2)
    counts = dict(counted)
    for key, value in done.items():
        if key[0] == "tally":
            counts.update(value)
        else:
            counts[key] = value
    return counts


def _contract(target: Target, snapshot: Snapshot, counts: dict[tuple[str, str], int],
              whole: bool = False) -> list[ContractCheck]:
    """Every record of ``[start, O)`` is accounted for on both sides: in bronze once, each a dead letter or a
    candidate, each candidate its event's winner or a duplicate, and the late events alike; with ``whole`` (an
    incremental run, which compares rows only where they can have changed), every reconciled table has as many rows
    in the stream as in the batch."""
    tables = {s.stream: s for s in stream_tables(target)}
    stream = {name: counts[("stream", name)] for name in RECORD_COUNTS}
    batch = {name: counts[("batch", name)] for name in RECORD_COUNTS}
    checks = [
        ContractCheck("log records in [start, O) = stream bronze rows", snapshot.records, stream["records"]),
        ContractCheck("stream bronze = silver candidates + dead letters", stream["records"],
                      stream["candidates"] + stream["dead_letters"]),
        ContractCheck("log records = batch candidates + batch dead letters", snapshot.records,
                      batch["candidates"] + batch["dead_letters"]),
        ContractCheck("silver candidates = silver events + duplicates", stream["candidates"],
                      stream["events"] + stream["duplicates"]),
        ContractCheck("stream late events = batch late events", stream["late_events"], batch["late_events"]),
    ]
    if whole:
        checks += [ContractCheck(f"whole table {tables[name].label}: stream rows = batch rows",
                                 counts[("stream", name)], counts[("batch", name)]) for name in tables]
    return checks


def _ledger_rows(run: AuditRun, finished: dt.datetime) -> list[ledger.LedgerRow]:
    p, snap = run.position, run.snapshot
    common = dict(run_id=run.run_id, pipeline=run.pipeline, started_at=run.started_at, finished_at=finished,
                  stream_app_id=p.app_id, stream_batch_id=p.batch_id, topic=p.topic,
                  start_offsets=dict(p.start_offsets), end_offsets=dict(p.end_offsets),
                  code_version=snap.code_version, as_of=run.as_of or run.started_at, kind=run.kind,
                  builds_on=run.builds_on, stream_code_version=p.code_version)
    rows = []
    for v in run.verdicts:
        d = v.diff
        failed = [e.description for e in v.gx.expectations if not e.success]
        rows.append(ledger.LedgerRow(
            **common, table=v.table.label, stream_table=v.table.stream, stream_version=v.version,
            snapshot_table=v.table.snapshot, snapshot_version=v.snapshot_version, stream_rows=d.stream_rows,
            batch_rows=d.batch_rows, matched=d.matched, missing_in_stream=d.counts[MISSING],
            extra_in_stream=d.counts[EXTRA], value_mismatch=d.counts[MISMATCH],
            buckets=len(d.buckets), differing_buckets=len(d.differing_buckets), compare_seconds=d.seconds,
            stream_equals_batch=v.stream_equals_batch, quality_ok=v.gx.quality_ok, success=v.success,
            gx_result=v.gx.result_url, detail="; ".join(filter(None, [d.schema_problem, v.not_compared, *failed])),
            ))
    broken = [f"{c.name}: {c.left} != {c.right}" for c in run.contract if not c.ok]
    rows.append(ledger.LedgerRow(
        **common, table=CONTRACT_LABEL, stream_table="", stream_version=None, snapshot_table="",
        snapshot_version=None, stream_rows=run.contract[0].right, batch_rows=run.contract[0].left,
        matched=sum(c.ok for c in run.contract), missing_in_stream=0, extra_in_stream=0,
        value_mismatch=len(broken), buckets=0, differing_buckets=0, compare_seconds=0.0,
        stream_equals_batch=not broken, quality_ok=True, success=not broken, gx_result="",
        detail="; ".join(broken)))
    return rows
