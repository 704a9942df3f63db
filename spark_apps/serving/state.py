"""Which copy of each gold table readers get: the batch snapshot (lambda) or the stream table (kappa).

A table starts on ``lambda``. After ``serving_exact_runs`` consecutive exact reconciliations of
distinct stream batches, spanning at least ``serving_min_span_s`` and with at least one full run among them (an
incremental run compares only what changed since the run it builds on), it switches to ``kappa``; one
failed reconciliation switches it back at once and alerts on-call. Every decision is appended to
``audit.serving_state`` with the ledger runs it rests on, all tables of a run in one Delta commit,
and the ``serving.<name>`` views are derived from the newest decisions: all of a pipeline's views read one cut of
the log (``io.serving_cut``), which moves in one catalog update, so a reader never sees half a switch.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from spark_apps.alerts.alert import Alert, runbook
from spark_apps.alerts.dispatch import raise_alert, resolve
from spark_apps.audit.ledger import FULL, LEDGER_TABLE
from spark_apps.core.errors import PlatformError
from spark_apps.core.paths import report_path
from spark_apps.core.settings import Settings
from spark_apps.io import serving_cut, stream_store
from spark_apps.io.catalog import ensure_table, read_if_present, table_path
from spark_apps.io.catalog_locks import table_write
from spark_apps.io.serving_cut import Cut, Member, serving_view
from spark_apps.pipeline.declaration import Pipeline
from spark_apps.pipeline.target import Target, display
from spark_apps.target import generations
from spark_apps.target.resolution import target_of

log = logging.getLogger(__name__)
SERVING_STATE_TABLE = "audit.serving_state"
LAMBDA, KAPPA = "lambda", "kappa"
OPERATOR_RUN_PREFIX = "operator-"
STATE_SCHEMA = ("pipeline string, table string, mode string, previous_mode string, changed boolean, reason string, "
                "run_id string, evidence_run_ids array<string>, source_table string, source_version bigint, "
                "decided_at timestamp")


@dataclass(frozen=True)
class RunEvidence:
    """One reconciliation of one gold table, as the ledger recorded it."""

    run_id: str
    started_at: dt.datetime
    stream_batch: tuple[str, int]
    success: bool
    stream_table: str
    snapshot_table: str
    snapshot_version: int
    detail: str = ""
    matches: bool = True  # stream and batch agreed on every table of the run (a failure was data quality only)
    full: bool = True  # the batch side recomputed the whole log (not an incremental run)


@dataclass(frozen=True)
class Decision:
    table: str
    mode: str
    previous_mode: str
    reason: str
    run_id: str
    evidence: tuple[str, ...]
    source_table: str
    source_version: int | None

    @property
    def changed(self) -> bool:
        return self.mode != self.previous_mode

    @property
    def view(self) -> str:
        return serving_view(self.table)

    def as_json(self) -> dict:
        """A decision as ``--json`` outputs and Airflow's Asset events carry it."""
        return {"table": self.table, "view": self.view, "mode": self.mode, "previous_mode": self.previous_mode,
                "changed": self.changed, "reason": self.reason, "run_id": self.run_id,
                "evidence_run_ids": list(self.evidence), "source_table": self.source_table,
                "source_version": self.source_version}


def decide(table: str, previous_mode: str, history: list[RunEvidence], settings: Settings) -> Decision:
    """The serving mode after the newest run of ``history`` (oldest first), and the runs that justify it."""
    latest = history[-1]
    if not latest.success:
        verb = "falls back to" if previous_mode == KAPPA else "stays on"
        return _decision(table, LAMBDA, previous_mode, latest, (latest.run_id,),
                         f"reconciliation {latest.run_id} failed ({latest.detail or 'stream differs from batch'}); "
                         f"{verb} the batch snapshot")
    streak = _exact_streak(history)
    if previous_mode == KAPPA:
        return _decision(table, KAPPA, KAPPA, latest, tuple(r.run_id for r in streak),
                         f"reconciliation {latest.run_id} exact; stays on the stream")
    span = (streak[-1].started_at - streak[0].started_at).total_seconds()
    needed = settings.serving_exact_runs
    full = any(r.full for r in streak)
    if len(streak) >= needed and span >= settings.serving_min_span_s and full:
        evidence = streak[-needed:] if any(r.full for r in streak[-needed:]) else streak
        return _decision(table, KAPPA, previous_mode, latest, tuple(r.run_id for r in evidence),
                         f"{len(streak)} consecutive exact reconciliations of distinct stream batches over "
                         f"{span:.0f}s, a full one among them (needs {needed} over {settings.serving_min_span_s}s); "
                         "serves the stream")
    return _decision(table, LAMBDA, previous_mode, latest, tuple(r.run_id for r in streak),
                     f"{len(streak)} of {needed} exact reconciliations over {span:.0f}s of "
                     f"{settings.serving_min_span_s}s{'' if full else ', none of them full'}; "
                     "stays on the batch snapshot")


def _exact_streak(history: list[RunEvidence]) -> list[RunEvidence]:
    """The newest unbroken run of exact reconciliations, one per stream batch (a rerun adds no evidence)."""
    streak: list[RunEvidence] = []
    for run in reversed(history):
        if not run.success:
            break
        if streak and run.stream_batch == streak[0].stream_batch:
            continue
        streak.insert(0, run)
    return streak


def _decision(table: str, mode: str, previous: str, latest: RunEvidence, evidence: tuple[str, ...],
              reason: str) -> Decision:
    source, version = (latest.stream_table, None) if mode == KAPPA else (latest.snapshot_table,
                                                                          latest.snapshot_version)
    return Decision(table, mode, previous, reason, latest.run_id, evidence, source, version)


# ---- I/O: the ledger, the state table, the views ---------------------------------------------------------

def advance(spark, settings: Settings, pipeline: Pipeline, run_id: str) -> list[Decision]:
    """Decide every gold table the run reconciled, record it in one commit, swap the views, alert on failure.

    Evaluating a run that was already evaluated returns the recorded decisions and changes nothing.
    """
    so_far = _decisions(spark, settings, pipeline.name)
    recorded = [d for d in so_far if d.run_id == run_id]
    if recorded:
        log.info("serving: run %s was already evaluated; nothing changes", run_id)
        return recorded
    histories = _histories(spark, settings, pipeline, run_id)
    if not histories:
        raise PlatformError(f"the ledger has no reconciliation of a gold table of {pipeline.name!r} in run {run_id}")
    _refuse_inactive_generation(spark, settings, pipeline, run_id, histories)
    modes = {d.table: d.mode for d in so_far}
    decisions = [decide(table, modes.get(table, LAMBDA), history, settings)
                 for table, history in sorted(histories.items())]
    record(spark, settings, pipeline, decisions)
    for decision in decisions:
        log.info("serving %s: %s (%s)", decision.view, decision.mode.upper(), decision.reason)
        latest = histories[decision.table][-1]
        if latest.success:
            resolve(settings, mismatch_key(pipeline.name, decision.table), f"serving state machine ({pipeline.name})",
                    f"reconciliation {latest.run_id} is exact; serving {decision.mode}", spark)
        else:
            _alert_failed(spark, settings, pipeline, decision, latest)
    return decisions


def _refuse_inactive_generation(spark, settings: Settings, pipeline: Pipeline, run_id: str,
                                histories: dict[str, list[RunEvidence]]) -> None:
    """Only a run of the active generation moves serving; a replay's new generation is served by its swap."""
    active = generations.active(spark, settings, pipeline.name)
    expected = {pipeline.tables().gold(g.name): pipeline.tables(active).gold(g.name) for g in pipeline.gold_tables}
    foreign = sorted(h[-1].stream_table for table, h in histories.items() if h[-1].stream_table != expected[table])
    if foreign:
        raise PlatformError(f"run {run_id} reconciled {', '.join(foreign)}, not the tables of the active generation "
                            f"{display(active)}; a replay's generation is served by `kappa replay swap`")


def record(spark, settings: Settings, pipeline: Pipeline, decisions: list[Decision]) -> None:
    """Append decisions (every table in one commit) and point the views at them."""
    _append(spark, settings, pipeline.name, decisions)
    register_views(spark, settings, pipeline)


def fall_back(spark, settings: Settings, pipeline: Pipeline, reason: str) -> list[Decision]:
    """Serve every gold table from its last batch snapshot now, e.g. before a replay rebuilds the stream tables.

    The stream then has to earn ``kappa`` again: reconciliations before this point no longer count.
    """
    now = dt.datetime.now(dt.UTC)
    run_id = f"{OPERATOR_RUN_PREFIX}{now:%Y%m%dT%H%M%S%fZ}"
    decisions = []
    for table, latest in sorted(current(spark, settings, pipeline.name).items()):
        source, version = ((latest.source_table, latest.source_version) if latest.mode == LAMBDA
                           else _last_snapshot(spark, settings, pipeline, table, latest.source_table))
        decisions.append(Decision(table, LAMBDA, latest.mode, f"operator: {reason}", run_id, (), source, version))
    if decisions:
        record(spark, settings, pipeline, decisions)
    return decisions


def _last_snapshot(spark, settings: Settings, pipeline: Pipeline, table: str, stream_table: str) -> tuple[str, int]:
    """The newest snapshot reconciled against the stream table being served: another generation's run may have
    recomputed the same snapshot table with other code."""
    from pyspark.sql import functions as F

    row = (spark.read.format("delta").load(str(table_path(settings, LEDGER_TABLE)))
           .where((F.col("pipeline") == pipeline.name) & (F.col("table") == table)
                  & (F.col("stream_table") == stream_table))
           .orderBy(F.col("started_at").desc()).first())
    return row["snapshot_table"], row["snapshot_version"]


def _operator_cutoffs(spark, settings: Settings, pipeline: str) -> dict[str, dt.datetime]:
    """Per table, when an operator last forced it back to the batch: evidence before that is void."""
    from pyspark.sql import functions as F

    rows = read_if_present(spark, settings, SERVING_STATE_TABLE)
    if rows is None:
        return {}
    forced = rows.where((F.col("pipeline") == pipeline) & F.col("run_id").startswith(OPERATOR_RUN_PREFIX))
    return {r["table"]: r["at"] for r in forced.groupBy("table").agg(F.max("decided_at").alias("at")).collect()}


def mismatch_key(pipeline: str, table: str) -> str:
    """The incident of a gold table whose reconciliation failed: open until its next exact one."""
    return f"reconcile:{pipeline}:{table}"


def _alert_failed(spark, settings: Settings, pipeline: Pipeline, decision: Decision, run: RunEvidence) -> None:
    fell_back = decision.previous_mode == KAPPA
    raise_alert(spark, settings, Alert(
        severity="critical",
        summary=(f"{decision.table}: {'serving fell back to the batch snapshot' if fell_back else 'stays on batch'}"
                 f" - reconciliation {run.run_id} "
                 + ("found the stream differs from the batch" if not run.matches else
                    f"failed data-quality rules (stream and batch agree; see the quality:{pipeline.name}:* alerts)")),
        source=f"serving state machine ({pipeline.name})", dedup_key=mismatch_key(pipeline.name, decision.table),
        table=decision.table,
        versions={decision.source_table: decision.source_version} if decision.source_version is not None else {},
        details={"run_id": run.run_id, "previous_mode": decision.previous_mode, "mode": decision.mode,
                 "reason": decision.reason, "stream_batch": list(run.stream_batch),
                 "report": str(report_path(settings, pipeline.name, run.run_id))},
        runbook=runbook("reconciliation-mismatch")))


def _histories(spark, settings: Settings, pipeline: Pipeline, run_id: str) -> dict[str, list[RunEvidence]]:
    """Per gold table the run reconciled, every reconciliation of it up to that run, oldest first.

    A run counts as exact for a table only if the whole run succeeded: a broken count contract or a
    differing silver table makes the gold tables built on it suspect too. Only runs that reconciled the same
    stream table as ``run_id`` count: another replay generation's runs say nothing about this one.
    """
    from pyspark.sql import functions as F

    ledger = read_if_present(spark, settings, LEDGER_TABLE)
    if ledger is None:
        raise PlatformError(f"no reconciliation ledger at {table_path(settings, LEDGER_TABLE)}; "
                            "run `kappa reconcile` first")
    rows = ledger.where(F.col("pipeline") == pipeline.name)
    anchor = rows.where(F.col("run_id") == run_id).agg(F.min("started_at")).first()[0]
    if anchor is None:
        raise PlatformError(f"the ledger has no run {run_id!r} of pipeline {pipeline.name!r}")
    runs = rows.where(F.col("started_at") <= anchor)
    run_ok = runs.groupBy("run_id").agg(F.min(F.col("success").cast("int")).alias("run_success"),
                                        F.min(F.col("stream_equals_batch").cast("int")).alias("run_matches"),
                                        F.concat_ws("; ", F.collect_set(F.when(~F.col("success"), F.concat(
                                            F.col("table"), F.lit(" "), F.col("detail"))))).alias("failures"))
    gold = [pipeline.tables().gold(g.name) for g in pipeline.gold_tables]
    kind = F.coalesce(F.col("kind"), F.lit(FULL)) if "kind" in runs.columns else F.lit(FULL)
    evidence = (runs.where(F.col("table").isin(gold)).join(run_ok, "run_id")
                .select("run_id", "table", "started_at", "stream_app_id", "stream_batch_id", "success", "run_success",
                        "failures", "run_matches", "stream_table", "snapshot_table", "snapshot_version",
                        kind.alias("kind"))
                .orderBy("started_at", "run_id").collect())
    reconciled = {r["table"]: r["stream_table"] for r in evidence if r["run_id"] == run_id}
    cutoffs = _operator_cutoffs(spark, settings, pipeline.name)
    histories: dict[str, list[RunEvidence]] = {}
    for r in evidence:
        cutoff = cutoffs.get(r["table"])
        if reconciled.get(r["table"]) == r["stream_table"] and (
                cutoff is None or r["started_at"] >= cutoff or r["run_id"] == run_id):
            histories.setdefault(r["table"], []).append(RunEvidence(
                run_id=r["run_id"], started_at=r["started_at"], stream_batch=(r["stream_app_id"], r["stream_batch_id"]),
                success=bool(r["success"]) and bool(r["run_success"]), stream_table=r["stream_table"],
                snapshot_table=r["snapshot_table"], snapshot_version=r["snapshot_version"],
                detail=r["failures"] or "", matches=bool(r["run_matches"]), full=r["kind"] == FULL))
    return histories


def _append(spark, settings: Settings, pipeline: str, decisions: list[Decision]) -> None:
    now = dt.datetime.now(dt.UTC)
    rows = [{"pipeline": pipeline, "table": d.table, "mode": d.mode, "previous_mode": d.previous_mode,
             "changed": d.changed, "reason": d.reason, "run_id": d.run_id, "evidence_run_ids": list(d.evidence),
             "source_table": d.source_table, "source_version": d.source_version, "decided_at": now}
            for d in decisions]
    frame = spark.createDataFrame(rows, STATE_SCHEMA)
    ensure_table(spark, settings, SERVING_STATE_TABLE, frame.schema, properties={"delta.appendOnly": "true"})
    path = table_path(settings, SERVING_STATE_TABLE)
    with table_write(spark, settings, path, "serving decisions"):
        frame.write.format("delta").mode("append").save(str(path))


def _decisions(spark, settings: Settings, pipeline: str | None = None) -> list[Decision]:
    """Every recorded decision, oldest first."""
    rows = read_if_present(spark, settings, SERVING_STATE_TABLE)
    if rows is None:
        return []
    if pipeline is not None:
        rows = rows.where(rows.pipeline == pipeline)
    return [Decision(r["table"], r["mode"], r["previous_mode"], r["reason"], r["run_id"],
                     tuple(r["evidence_run_ids"]), r["source_table"], r["source_version"])
            for r in rows.orderBy("decided_at", "table").collect()]


def current(spark, settings: Settings, pipeline: str | None = None) -> dict[str, Decision]:
    """The newest decision per gold table."""
    return {d.table: d for d in _decisions(spark, settings, pipeline)}


def current_modes(spark, settings: Settings, pipeline: str) -> dict[str, str]:
    return {table: d.mode for table, d in current(spark, settings, pipeline).items()}


def history(spark, settings: Settings, table: str | None = None) -> list[Decision]:
    return [d for d in _decisions(spark, settings) if table is None or d.table == table]


def last_audit_at(spark, settings: Settings, target: Target,
                  at_or_before: dt.datetime | None = None) -> dt.datetime | None:
    """The moment the newest reconciliation of the generation's gold tables stands for (at or before
    ``at_or_before``, when given), or None before the first (a replay's run audits another generation and does not
    make this one's audit less due).

    A scheduled run stands for its data interval's end, not for when it happened to start: measured from the start,
    a run that starts 5 minutes late would push every later "is an audit due?" 5 minutes later, one interval at a
    time. Rows from before the ledger had ``as_of`` stand for their start."""
    from pyspark.sql import functions as F

    rows = read_if_present(spark, settings, LEDGER_TABLE)
    if rows is None:
        return None
    stands_for = F.coalesce(F.col("as_of"), F.col("started_at")) if "as_of" in rows.columns else F.col("started_at")
    gold = [target.tables.gold(g.name) for g in target.pipeline.gold_tables]
    return (rows.where((F.col("pipeline") == target.name) & F.col("stream_table").isin(gold)
                       & (F.lit(True) if at_or_before is None else stands_for <= F.lit(at_or_before)))
            .agg(F.max(stands_for)).first()[0])


def register_views(spark, settings: Settings, pipeline: Pipeline) -> list[Decision]:
    """Point the pipeline's cut at what its newest decisions serve, and every ``serving.*`` view of it at the cut."""
    decisions = list(current(spark, settings, pipeline.name).values())
    if not decisions:
        return []
    with serving_cut.locked(settings, pipeline.name):
        target = target_of(settings, pipeline, generations.active(spark, settings, pipeline.name))
        cut = decided_cut(spark, settings, target, decisions)
        columns = serving_cut.write(spark, settings, target, cut)
        for d in decisions:
            pinned = f" VERSION AS OF {d.source_version}" if d.source_version is not None else ""
            properties = {"kappa.serving.mode": d.mode, "kappa.serving.source": served_from(d),
                          "kappa.serving.run_id": d.run_id, "kappa.serving.cut": serving_cut.cut_view(pipeline.name)}
            serving_cut.replace_view(
                spark, d.view,
                serving_cut.table_view_query(pipeline.name, d.table,
                                             [column for column, _ in columns[d.table.split(".", 1)[1]]]),
                properties, f"{d.mode}: {d.source_table}{pinned.lower()} (decided by run {d.run_id})")
    if not cut.consistent:
        log.warning("serving %s: the tables of its cut reflect different offsets: %s", pipeline.name,
                    "; ".join(cut.describe()))
    return decisions


def decided_cut(spark, settings: Settings, target: Target, decisions: list[Decision]) -> Cut:
    """The cut the decisions serve, of ``target``'s (the active) generation. When every gold table serves the
    stream: the versions of the stream's newest micro-batch, and the stream moves the cut from there. Otherwise the
    audited cut: each batch snapshot, and for a table still on the stream the stream version that reconciliation
    proved equal, all at that run's offsets."""
    from spark_apps.audit.recompute import align

    pipeline, generation = target.pipeline, target.generation
    if all(d.mode == KAPPA for d in decisions):
        alignment = align(spark, settings, target)
        position = alignment.position
        members = tuple(Member(d.table, d.source_table, alignment.versions[d.source_table], position.end_offsets)
                        for d in sorted(decisions, key=lambda d: d.table))
        return Cut(pipeline.name, serving_cut.FOLLOWS_STREAM, generation,
                   f"batch {position.batch_id} of {position.app_id}", members, str(settings.warehouse_dir))
    runs = _ledger_runs(spark, settings, pipeline.name)
    snapshots = [runs.get(("snapshot", d.table, d.source_table, d.source_version)) for d in decisions
                 if d.mode == LAMBDA]
    anchor = max((r for r in snapshots if r is not None), key=lambda r: r["started_at"], default=None)
    members = []
    for d in sorted(decisions, key=lambda d: d.table):
        if d.mode == LAMBDA:
            row = runs.get(("snapshot", d.table, d.source_table, d.source_version))
            members.append(Member(d.table, d.source_table, d.source_version, _offsets(row)))
            continue
        row = (runs.get(("run", anchor["run_id"], d.table)) if anchor is not None else None) or \
            runs.get(("stream", d.table, d.source_table))
        if row is None or row["stream_table"] != d.source_table:
            row = runs.get(("stream", d.table, d.source_table))
        version = row["stream_version"] if row is not None else stream_store.latest_version(settings, target)
        members.append(Member(d.table, d.source_table, version, _offsets(row)))
    basis = f"run {anchor['run_id']}" if anchor is not None else f"run {decisions[0].run_id}"
    return Cut(pipeline.name, serving_cut.FOLLOWS_AUDIT, generation, basis, tuple(members), str(settings.warehouse_dir))


def _ledger_runs(spark, settings: Settings, pipeline: str) -> dict[tuple, dict]:
    """The ledger's rows of the pipeline, newest wins, by ("snapshot", table, snapshot table, version),
    ("run", run id, table) and ("stream", table, stream table)."""
    from pyspark.sql import functions as F

    ledger = read_if_present(spark, settings, LEDGER_TABLE)
    if ledger is None:
        return {}
    rows = (ledger.where(F.col("pipeline") == pipeline)
            .select("run_id", "table", "started_at", "stream_table", "stream_version", "end_offsets",
                    "snapshot_table", "snapshot_version").orderBy("started_at").collect())
    found: dict[tuple, dict] = {}
    for row in rows:
        r = row.asDict()
        found[("snapshot", r["table"], r["snapshot_table"], r["snapshot_version"])] = r
        found[("run", r["run_id"], r["table"])] = r
        found[("stream", r["table"], r["stream_table"])] = r
    return found


def _offsets(row: dict | None) -> dict[int, int]:
    return {int(p): int(o) for p, o in (row["end_offsets"] or {}).items()} if row is not None else {}


def served_from(decision: Decision) -> str:
    """What a serving view reads, as models downstream report it: ``batch.x@v7`` (pinned) or ``gold.x``."""
    pinned = f"@v{decision.source_version}" if decision.source_version is not None else ""
    return f"{decision.source_table}{pinned}"
