"""Daily Delta maintenance: compact, vacuum within the retention, then check what a replay depends on.

Every micro-batch leaves small files in each table it writes. ``OPTIMIZE`` compacts them; ``VACUUM``
then deletes the files that no version of the last ``KAPPA_VACUUM_RETENTION_HOURS`` (at least 7 days)
still needs, so the auditor and a rollback can read any version of that window. The retention comes from
the settings, which refuse less than 168 hours, and Delta's own retention check stays on.

The append-only tables (the reconciliation ledger, the serving state) are maintained like the others,
never below the same retention: ``OPTIMIZE`` only rewrites files without changing a row (Delta allows
that on a ``delta.appendOnly`` table), so ``VACUUM`` can only delete such rewritten copies once they
are older than the retention. Every row stays in the current version; every version of the window
stays readable.

First the store's gold tables are compacted (``stream.compaction``). ``OPTIMIZE`` changes no row and the stream
only appends, so they do not conflict; a conflicting operation is retried a few times all the same. Then two
checks, each alerting on-call when it fails: the streaming checkpoint agrees with ``stream.commits``, and
the log still holds every offset from the stream's start (a Kappa replay reads the whole log).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from spark_apps.alerts.alert import Alert, runbook
from spark_apps.alerts.dispatch import ALERTS_TABLE, raise_alert, resolve
from spark_apps.audit.ledger import LEDGER_TABLE
from spark_apps.audit.recompute import RetentionError, check_retention, stream_tables
from spark_apps.core.errors import PlatformError, first_line
from spark_apps.core.object_path import Location
from spark_apps.core.settings import Settings
from spark_apps.io import delta_log, lineage, stream_store
from spark_apps.io.catalog import table_path
from spark_apps.io.catalog_locks import table_write
from spark_apps.io.delta_writes import with_retries
from spark_apps.pipeline.target import Target
from spark_apps.serving.state import SERVING_STATE_TABLE
from spark_apps.stream.checkpoint import checkpoint_problem, read_app_id
from spark_apps.stream.compaction import Compaction, compact

log = logging.getLogger(__name__)
SHARED_AUDIT_TABLES = (ALERTS_TABLE, LEDGER_TABLE, SERVING_STATE_TABLE)
CHECKPOINT, LOG_RETENTION = "checkpoint", "log retention"


@dataclass(frozen=True)
class TableMaintenance:
    """What maintenance did to one table: live files before and after, files vacuum deleted, time taken."""

    table: str
    files_before: int
    files_after: int
    vacuumed: int | None
    seconds: float
    error: str = ""


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class MaintenanceReport:
    pipeline: str
    tables: list[TableMaintenance] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    compactions: list[Compaction] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks) and not any(t.error for t in self.tables)


def maintain(spark, settings: Settings, target: Target, optimize: bool = True,
             vacuum: bool = True) -> MaintenanceReport:
    """Maintain every existing table of the target's generation, then run both checks (each alerts when it
    fails)."""
    pipeline = target.pipeline
    report = MaintenanceReport(pipeline=pipeline.name)
    report.compactions = _compact(spark, settings, target)
    for table in maintained_tables(target):
        path = table_path(settings, table)
        if delta_log.has_commits(path):
            report.tables.append(_maintain_table(spark, settings, table, path, optimize, vacuum))
    failed = {t.table: t.error for t in report.tables if t.error}
    if failed:
        raise_alert(spark, settings, Alert(
            severity="warning", summary=f"Delta maintenance of {pipeline.name} failed for {', '.join(failed)}",
            source=f"maintenance {pipeline.name}", dedup_key=maintenance_key(pipeline.name, "tables"),
            details=failed, runbook=runbook("maintenance-failed")))
    else:
        resolve(settings, maintenance_key(pipeline.name, "tables"), f"maintenance {pipeline.name}",
                f"every table of {pipeline.name} was maintained", spark)
    report.checks = [check_checkpoint(spark, settings, target), check_log_retention(spark, settings, target)]
    return report


def _compact(spark, settings: Settings, target: Target) -> list[Compaction]:
    """Compaction of the store before its OPTIMIZE (which then packs the compacted files too); a failure is logged
    and left to the next run: the views are the same either way."""
    store = target.tables.store
    if not delta_log.has_commits(table_path(settings, store)):
        return []
    try:
        return compact(spark, settings, target)
    except Exception as exc:  # compaction only makes reads cheaper; it must not stop maintenance
        log.error("compaction of %s failed: %s", store, first_line(exc))
        return []


def maintained_tables(target: Target) -> list[str]:
    """The generation's store (every stream table is a view of it), the batch snapshots, and the audit tables every
    pipeline shares."""
    return [target.tables.store, *(t.snapshot for t in stream_tables(target)), *SHARED_AUDIT_TABLES]


def _maintain_table(spark, settings: Settings, table: str, path: Location, optimize: bool,
                    vacuum: bool) -> TableMaintenance:
    """OPTIMIZE, then VACUUM RETAIN ``retention_hours``; a failure is recorded, not raised, so the rest go on."""
    started = time.monotonic()
    before, vacuumed, error = _live_files(spark, path), None, ""
    try:
        if optimize:
            with table_write(spark, settings, path, f"OPTIMIZE {table}"):
                with_retries(lambda: spark.sql(f"OPTIMIZE delta.`{path}`").collect(), f"OPTIMIZE {table}")
        if vacuum:
            retention = settings.vacuum_retention_hours
            with table_write(spark, settings, path, f"VACUUM {table}"):
                with_retries(lambda: spark.sql(f"VACUUM delta.`{path}` RETAIN {retention} HOURS").collect(),
                             f"VACUUM {table}")
            vacuumed = _vacuumed_files(path)
    except Exception as exc:  # one table's failure must not stop the others' maintenance or the checks
        error = first_line(exc)
        log.error("maintenance of %s failed: %s", table, error)
    result = TableMaintenance(table, before, _live_files(spark, path), vacuumed, time.monotonic() - started, error)
    log.info("%s: %d -> %d files, %s vacuumed, %.1fs", table, result.files_before, result.files_after,
             "-" if vacuumed is None else vacuumed, result.seconds)
    return result


def _live_files(spark, path: Location) -> int:
    return spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["numFiles"]


def _vacuumed_files(path: Location) -> int | None:
    """Files the last VACUUM deleted, from its ``VACUUM END`` commit (None when Delta did not log one)."""
    for commit in delta_log.commits(path, 5):
        if commit.operation == "VACUUM END":
            return int(commit.metrics.get("numDeletedFiles", 0))
    return None


# ---- checks ------------------------------------------------------------------------------------------

def maintenance_key(pipeline: str, what: str) -> str:
    """The incident of one maintenance step (``tables``, ``checkpoint``, ``log-retention``): open until it passes."""
    return f"maintenance:{pipeline}:{what}"


def check_checkpoint(spark, settings: Settings, target: Target) -> Check:
    """The streaming checkpoint agrees with ``stream.commits``; a critical alert when it does not."""
    from pyspark.sql import functions as F

    pipeline, checkpoint = target.pipeline, target.checkpoint
    if not delta_log.has_commits(table_path(settings, target.tables.store)):
        return Check(CHECKPOINT, True, f"no stream tables in {settings.warehouse_dir} yet")
    done_before = _last(lineage.committed_batches(checkpoint))
    rows = stream_store.read_view(spark, settings, target, target.tables.commits) \
        .groupBy("app_id").agg(F.max("batch_id").alias("last"))
    recorded = {r.app_id: r.last for r in rows.collect()}
    done_after = _last(lineage.committed_batches(checkpoint))
    app_id = read_app_id(checkpoint)
    problem = checkpoint_problem(app_id, recorded, done_before, done_after)
    if not problem:
        resolve(settings, maintenance_key(pipeline.name, "checkpoint"), f"maintenance {pipeline.name}",
                f"{checkpoint} agrees with {target.tables.commits} again", spark)
        return Check(CHECKPOINT, True, f"{checkpoint} committed batch {done_after}; {target.tables.commits} "
                                       f"holds {max(recorded.values(), default='none')}")
    summary = f"checkpoint {checkpoint} of {pipeline.name} disagrees with {target.tables.commits}: {problem}"
    raise_alert(spark, settings, Alert(
        severity="critical", summary=summary, source=f"maintenance {pipeline.name}",
        dedup_key=maintenance_key(pipeline.name, "checkpoint"), table=target.tables.commits,
        details={"checkpoint": str(checkpoint), "app_id": app_id, "recorded": recorded,
                 "checkpoint_committed": done_after}, runbook=runbook("maintenance-failed")))
    return Check(CHECKPOINT, False, summary)


def check_log_retention(spark, settings: Settings, target: Target) -> Check:
    """The topic still holds every offset from the stream's start to the last batch it recorded.

    A lost range raises the ``retention:<topic>`` alert (in ``check_retention``); a log that cannot be
    read raises a critical maintenance alert, since a replay could not be vouched for either.
    """
    pipeline = target.pipeline
    position = last_position(spark, settings, target)
    if position is None:
        return Check(LOG_RETENTION, True, "the stream has consumed nothing yet")
    source = f"maintenance {pipeline.name}"
    lost = ""
    try:
        check_retention(spark, settings, position, source=source)
    except RetentionError as exc:
        lost = str(exc)
    except PlatformError as exc:
        summary = f"cannot check that {position.topic} still holds the stream's log: {exc}"
        raise_alert(spark, settings, Alert(
            severity="critical", summary=summary, source=source,
            dedup_key=maintenance_key(pipeline.name, "log-retention"), offsets=position.end_offsets,
            runbook=runbook("maintenance-failed")))
        return Check(LOG_RETENTION, False, summary)
    resolve(settings, maintenance_key(pipeline.name, "log-retention"), source, f"{position.topic} can be read again",
            spark)
    if lost:
        return Check(LOG_RETENTION, False, lost)
    spans = ", ".join(f"p{p}=[{position.start_offsets.get(p, 0)},{o})" for p, o in sorted(position.end_offsets.items()))
    return Check(LOG_RETENTION, True, f"{position.topic} still holds {spans} (batch {position.batch_id})")


def last_position(spark, settings: Settings, target: Target) -> lineage.StreamPosition | None:
    """The log prefix of the last batch in the commit log, None before the first one.

    Read from its rows (the batch's end, the start of its app's first batch), not from the table history,
    which grows by a version per micro-batch.
    """
    from pyspark.sql import functions as F

    if not delta_log.has_commits(table_path(settings, target.tables.store)):
        return None
    version = stream_store.latest_version(settings, target)
    rows = stream_store.read_view(spark, settings, target, target.tables.commits, version)
    last = rows.orderBy(F.desc("batch_id")).first()
    if last is None:
        return None
    first = rows.where(F.col("app_id") == last.app_id).orderBy("batch_id").first()
    return lineage.StreamPosition(table_version=version, app_id=last.app_id, batch_id=last.batch_id,
                                  topic=last.topic, start_offsets=dict(first.start_offsets),
                                  end_offsets=dict(last.end_offsets))


def _last(batches: list[int]) -> int:
    return batches[-1] if batches else -1


def summary_lines(report: MaintenanceReport) -> list[str]:
    """One line per table and per check, for the command line and the task log."""
    lines = [c.line() for c in report.compactions]
    for t in report.tables:
        vacuumed = "not vacuumed" if t.vacuumed is None else f"{t.vacuumed} vacuumed"
        line = (f"{t.table:36s} {'FAILED' if t.error else 'OK':6s} files {t.files_before} -> {t.files_after}, "
                f"{vacuumed}, {t.seconds:.1f}s")
        lines.append(f"{line}: {t.error}" if t.error else line)
    lines += [f"{'check ' + c.name:36s} {'OK' if c.ok else 'FAILED':6s} {c.detail}" for c in report.checks]
    return lines
