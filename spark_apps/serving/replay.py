"""Kappa replay, blue/green: how a logic change is deployed without readers ever seeing unproven tables.

1. ``build``: a new generation of every stream table (``gold.x__g2``, a fresh checkpoint) is streamed from
   offset 0 of the log until caught up, by the code being deployed; the active generation keeps streaming
   and serving meanwhile, untouched;
2. ``reconcile``: the auditor recomputes the batch from the same log prefix with the same (new) code and
   compares every table of the new generation exactly; a failure alerts and leaves serving as it is;
3. ``swap`` (only after an exact reconciliation): the new generation becomes active (its event and the old
   one's ``retired`` in one commit of ``audit.generations``), then every gold table's serving decision moves
   to it in one commit of ``audit.serving_state``, so readers switch all views at once. Each table keeps its
   serving mode: a ``kappa`` table serves the new stream table, a ``lambda`` one the new generation's batch
   snapshot of that reconciliation (it still has to earn ``kappa`` with the new generation's runs);
4. ``rollback``: the previous generation becomes active again and every view is restored to exactly what it
   served before the swap. Old generations' tables and checkpoints are kept for this.

A swap or rollback interrupted between its two commits is finished by running the same command again.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from pathlib import Path

from spark_apps.alerts.alert import Alert, runbook
from spark_apps.alerts.dispatch import raise_alert, resolve, resolve_cleared
from spark_apps.audit import ledger
from spark_apps.audit.recompute import check_log_complete
from spark_apps.core.paths import report_path
from spark_apps.core.settings import Settings
from spark_apps.pipeline.declaration import Pipeline, load_pipeline
from spark_apps.pipeline.provenance import pipeline_version
from spark_apps.pipeline.target import BASE, Target, display
from spark_apps.serving import state as serving
from spark_apps.serving.state import KAPPA, LAMBDA, Decision
from spark_apps.target import generations
from spark_apps.target.generations import (
    ACTIVE,
    BUILDING,
    BUILT,
    FAILED,
    RECONCILED,
    RETIRED,
    ROLLBACK_RUN_PREFIX,
    ROLLED_BACK,
    GenerationEvent,
    ReplayRefused,
)

log = logging.getLogger(__name__)
REPLAY_RUN_PREFIX = "replay."
ACTIONS = ("start", "build", "reconcile", "swap", "rollback", "status")


@dataclass(frozen=True)
class ReconciledTable:
    """A gold table of the new generation as its reconciliation recorded it in the ledger."""

    table: str
    stream_table: str
    snapshot_table: str
    snapshot_version: int


@dataclass(frozen=True)
class Build:
    generation: str
    checkpoint: Path
    batches: int
    records: int


@dataclass(frozen=True)
class ReplayOutcome:
    """What one ``kappa replay <action>`` did, in the order it did it (see :func:`run_action`).

    ``reconciled``: :func:`reconcile`'s outcome; ``decisions``: the serving decisions of a swap or rollback;
    ``events``: the generations afterwards (not read when the reconciliation failed and the run stopped there).
    """

    pipeline: str
    action: str
    generation: str | None
    built: Build | None = None
    reconciled: dict | None = None
    decisions: tuple[Decision, ...] = ()
    swapped: bool = False
    rolled_back: bool = False
    events: tuple[GenerationEvent, ...] = ()

    @property
    def failed(self) -> bool:
        """The new generation differs from the batch: serving is unchanged, the run stopped after reconciling."""
        return self.reconciled is not None and not self.reconciled["success"]

    def status_lines(self) -> list[str]:
        return status_lines(list(self.events))

    def as_json(self) -> dict:
        result: dict = {"pipeline": self.pipeline}
        if self.built is not None:
            result.update(generation=self.built.generation, batches=self.built.batches, records=self.built.records)
        if self.reconciled is not None:
            result.update(self.reconciled)
        if self.swapped:
            result.update(swapped=True, decisions=[d.as_json() for d in self.decisions])
        if self.rolled_back:
            result.update(rolled_back=True, decisions=[d.as_json() for d in self.decisions])
        if not self.failed:
            events = list(self.events)
            result.update(active=generations.active_generation(events),
                          generations=[{"generation": e.generation, "status": e.status, "run_id": e.run_id,
                                        "pipeline_spec": e.pipeline_spec, "previous_generation": e.previous_generation}
                                       for e in generations.latest(events).values()])
        return result


# ---- pure ------------------------------------------------------------------------------------------------------

def check_code_is_of(code: Pipeline, spec: str, own: Pipeline) -> None:
    """Refuse to deploy ``code`` (given as ``spec``) in the replay of another pipeline than ``own``: the replay
    DAG of one pipeline would build another's generation and then restart its own stream."""
    if code.name != own.name:
        raise ReplayRefused(f"--pipeline {spec} is the code of pipeline {code.name!r}, not of {own.name!r}, whose "
                            f"replay this is; run the replay of {code.name!r}")


def replay_run_id(generation: str, now: dt.datetime) -> str:
    return f"{REPLAY_RUN_PREFIX}{generation}.{now:%Y%m%dT%H%M%S%fZ}"


def rollback_run_id(generation: str, now: dt.datetime) -> str:
    return f"{ROLLBACK_RUN_PREFIX}{generation}.{now:%Y%m%dT%H%M%S%fZ}"


def swap_decisions(current: dict[str, Decision], reconciled: list[ReconciledTable], generation: str, run_id: str,
                   reason: str = "") -> list[Decision]:
    """Every gold table moves to the new generation, each keeping its mode (a table never decided is ``lambda``).

    ``kappa``: the new stream table (latest); ``lambda``: the batch snapshot the reconciliation compared it with.
    """
    decisions = []
    for table in sorted(reconciled, key=lambda t: t.table):
        mode = current[table.table].mode if table.table in current else LAMBDA
        source, version = ((table.stream_table, None) if mode == KAPPA
                           else (table.snapshot_table, table.snapshot_version))
        copy = "stream table" if mode == KAPPA else "batch snapshot"
        why = f"blue/green replay {generation} reconciled by run {run_id}; serves its {copy}"
        decisions.append(Decision(table.table, mode, mode, f"{why}: {reason}" if reason else why, run_id, (run_id,),
                                  source, version))
    return decisions


def rollback_decisions(history: list[Decision], swap_run: str, generation: str, target: str, run_id: str,
                       reason: str) -> list[Decision]:
    """Every gold table back to the decision that was current just before ``swap_run`` moved it to ``generation``.

    ``history``: the pipeline's serving decisions, oldest first.
    """
    first = next((i for i, d in enumerate(history) if d.run_id == swap_run), None)
    if first is None:
        raise ReplayRefused(f"serving never moved to generation {generation} (no decision of run {swap_run}); "
                            "nothing to roll back")
    before = {d.table: d for d in history[:first]}
    now = {d.table: d for d in history}
    unserved = sorted(set(now) - set(before))
    if unserved:
        raise ReplayRefused(f"{', '.join(unserved)} served nothing before generation {generation}; "
                            "there is no earlier view to restore")
    why = f"rollback of blue/green replay {generation} to generation {display(target)}: {reason}"
    return [Decision(table, b.mode, now[table].mode, why, run_id, b.evidence, b.source_table, b.source_version)
            for table, b in sorted(before.items())]


def status_lines(events: list[GenerationEvent]) -> list[str]:
    """One line per generation, the base one first, then in the order they were started; the active one marked."""
    active = generations.active_generation(events)
    newest = generations.latest(events)
    lines = []
    if BASE not in newest:
        lines.append(f"* {'base':8s} {ACTIVE:12s} the unsuffixed tables, serving since the start")
    for event in sorted(newest.values(), key=lambda e: e.generation != BASE):
        mark = "* " if event.generation == active else "  "
        spec = generations.spec_for(events, event.generation, "")
        detail = ", ".join(filter(None, [f"run {event.run_id}" if event.run_id else "", f"code {spec}" if spec else "",
                                         f"{event.recorded_at:%Y-%m-%d %H:%M:%S}" if event.recorded_at else "",
                                         event.reason]))
        lines.append(f"{mark}{display(event.generation):8s} {event.status:12s} {detail}")
    return lines


# ---- I/O ------------------------------------------------------------------------------------------------------

def run_action(spark, settings: Settings, pipeline: Pipeline, spec: str, action: str, generation: str | None = None,
               *, run_id: str | None = None, reason: str = "", swap_after: bool = False) -> ReplayOutcome:
    """One replay action, its steps in their order: ``start`` = build, reconcile, then swap (``swap_after``) only
    when the reconciliation is exact; ``reconcile`` then swap (``swap_after``) likewise; ``build``, ``reconcile``,
    ``swap``, ``rollback`` alone; ``status`` none.

    A failed reconciliation stops the run there (serving is unchanged; :attr:`ReplayOutcome.failed`).
    """
    if action not in ACTIONS:
        raise ReplayRefused(f"unknown replay action {action!r}; one of {', '.join(ACTIONS)}")
    built = reconciled = None
    decisions: list[Decision] = []
    if action in ("start", "build"):
        built = build(spark, settings, pipeline, spec, generation, reason)
        generation = built.generation
    if action in ("start", "reconcile"):
        reconciled = audit_generation(spark, settings, pipeline, generation, run_id)
        generation = reconciled["generation"]
        if not reconciled["success"]:
            return ReplayOutcome(pipeline.name, action, generation, built, reconciled)
    swapped = action == "swap" or (action in ("start", "reconcile") and swap_after)
    if swapped:
        decisions = swap(spark, settings, pipeline, generation, reason)
    if action == "rollback":
        decisions = rollback(spark, settings, pipeline, reason)
    events = generations.read(spark, settings, pipeline.name)
    return ReplayOutcome(pipeline.name, action, generation, built, reconciled, tuple(decisions), swapped,
                         action == "rollback", tuple(events))


def build(spark, settings: Settings, pipeline: Pipeline, spec: str = "", generation: str | None = None,
          reason: str = "") -> Build:
    """Stream a new generation from offset 0 until caught up (or resume an interrupted build), beside the active one;
    refused (and alerted) when the log no longer starts at offset 0."""
    from spark_apps.stream.job import StreamJob
    from spark_apps.target.resolution import target_of

    check_log_complete(spark, settings, pipeline.source_topic(settings), source=f"replay ({pipeline.name})",
                       what=f"replay of {pipeline.name}")
    events = generations.read(spark, settings, pipeline.name)
    name = generations.check_name(generation) if generation else (
        generations.resumable(events) or generations.next_name(events))
    generations.check_build(events, name, spec)
    version = pipeline_version(pipeline)
    generations.record(spark, settings, [GenerationEvent(pipeline.name, name, BUILDING, spec, reason=reason,
                                                         code_version=version)])
    resolve_cleared(settings, replay_key(pipeline.name, ""), [replay_key(pipeline.name, name)],
                    f"kappa replay ({pipeline.name})", f"generation {name} replaces it", spark)
    job = StreamJob(spark, settings, target_of(settings, pipeline, name))
    log.info("replay %s: streaming %s from offset 0 into generation %s (checkpoint %s)", pipeline.name, job.topic,
             name, job.checkpoint)
    stats = job.run(until_caught_up=True)
    generations.record(spark, settings, [GenerationEvent(pipeline.name, name, BUILT, spec, reason=reason,
                                                         code_version=version)])
    return Build(name, job.checkpoint, len(stats), sum(s.records for s in stats))


def audit_generation(spark, settings: Settings, pipeline: Pipeline, generation: str | None = None,
                     run_id: str | None = None) -> dict:
    """Audit every table of a built generation against the batch recomputed with the same code; record the verdict.

    A ``run_id`` already in the ledger is reused, not recomputed. A failed reconciliation alerts; serving is untouched.
    """
    from spark_apps.audit.reconciliation import reconcile_or_reuse
    from spark_apps.target.resolution import target_of

    events = generations.read(spark, settings, pipeline.name)
    name = generation if generation is not None else generations.awaiting(
        events, (BUILT, RECONCILED, FAILED), "run `kappa replay start` first")
    # A rerun of the run that already swapped the generation in (a retried Airflow task) finds its verdict again.
    swapped = generations.latest(events).get(name)
    rerun = swapped is not None and swapped.status == ACTIVE and run_id is not None and swapped.run_id == run_id
    event = generations.check_status(events, name, (BUILT, RECONCILED, FAILED, *((ACTIVE,) if rerun else ())),
                                     "reconcile")
    target = target_of(settings, _code_of(events, name, pipeline), name)
    run_id = run_id or replay_run_id(name, dt.datetime.now(dt.UTC))
    reconciliation = reconcile_or_reuse(spark, settings, target, run_id=run_id)
    log.info("%s", "\n".join(reconciliation.lines))
    result = reconciliation.summary
    gold = {target.tables.gold(g.name) for g in target.pipeline.gold_tables}
    if not gold <= {t["stream_table"] for t in result["tables"]}:
        raise ReplayRefused(f"run {run_id} in the ledger did not reconcile generation {name}'s gold tables")
    status = RECONCILED if result["success"] else FAILED
    if event.status != ACTIVE and (event.status, event.run_id) != (status, run_id):
        generations.record(spark, settings, [GenerationEvent(pipeline.name, name, status, event.pipeline_spec,
                                                             run_id=run_id, reason=event.reason,
                                                             code_version=event.code_version)])
    if result["success"]:
        resolve(settings, replay_key(pipeline.name, name), f"kappa replay ({pipeline.name})",
                f"reconciliation {run_id} of generation {name} is exact", spark)
    else:
        _alert_failed(spark, settings, target, result)
    return {**result, "generation": name, "status": status, "report": str(reconciliation.report)}


def swap(spark, settings: Settings, pipeline: Pipeline, generation: str | None = None,
         reason: str = "") -> list[Decision]:
    """Serve a reconciled generation: make it active, then move every gold view to it in one commit."""
    from spark_apps.target.resolution import target_of

    events = generations.read(spark, settings, pipeline.name)
    name = generation if generation is not None else generations.awaiting(
        events, (RECONCILED,), "a generation is swapped in after an exact `kappa replay reconcile`")
    pipeline = _code_of(events, name, pipeline)
    history = _history(spark, settings, pipeline)
    pending = generations.unfinished(events, {d.run_id for d in history})
    if pending is not None and (pending.generation != name or pending.run_id.startswith(ROLLBACK_RUN_PREFIX)):
        raise ReplayRefused(_interrupted(pending))
    event = generations.check_status(events, name, (RECONCILED, ACTIVE), "swap in")
    if event.status == ACTIVE and pending is None:
        log.info("replay: generation %s already serves", name)
        return list(serving.current(spark, settings, pipeline.name).values())
    if event.status == RECONCILED:
        previous = generations.active_generation(events)
        generations.record(spark, settings, [
            GenerationEvent(pipeline.name, name, ACTIVE, event.pipeline_spec, previous, event.run_id, reason,
                            event.code_version),
            GenerationEvent(pipeline.name, previous, RETIRED, generations.spec_for(events, previous, ""),
                            run_id=event.run_id, reason=f"replaced by {name}")])
    decisions = swap_decisions(serving.current(spark, settings, pipeline.name),
                               _reconciled(spark, settings, target_of(settings, pipeline, name), event.run_id), name,
                               event.run_id, reason)
    serving.record(spark, settings, pipeline, decisions)
    return decisions


def rollback(spark, settings: Settings, pipeline: Pipeline, reason: str) -> list[Decision]:
    """Serve the previous generation again, every view exactly as before the swap, in one commit."""
    events = generations.read(spark, settings, pipeline.name)
    history = _history(spark, settings, pipeline)
    pending = generations.unfinished(events, {d.run_id for d in history})
    if pending is not None and not pending.run_id.startswith(ROLLBACK_RUN_PREFIX):
        raise ReplayRefused(_interrupted(pending))
    if pending is not None:
        run_id, target = pending.run_id, pending.generation
        current = generations.rolled_back_by(events, run_id)
    else:
        active = generations.active_event(events)
        if active is None or active.previous_generation is None:
            raise ReplayRefused(f"generation {display(generations.active_generation(events))} replaced no other "
                                "generation; nothing to roll back to")
        current, target = active.generation, active.previous_generation
        run_id = rollback_run_id(current, dt.datetime.now(dt.UTC))
        generations.record(spark, settings, [
            GenerationEvent(pipeline.name, target, ACTIVE, generations.spec_for(events, target, ""),
                            generations.previous_of(events, target), run_id, reason),
            GenerationEvent(pipeline.name, current, ROLLED_BACK, active.pipeline_spec, run_id=run_id, reason=reason)])
    decisions = rollback_decisions(history, generations.swap_run_of(events, current), current, target, run_id,
                                   reason)
    serving.record(spark, settings, pipeline, decisions)
    return decisions


def _interrupted(pending: GenerationEvent) -> str:
    finish = ("kappa replay rollback --reason ..." if pending.run_id.startswith(ROLLBACK_RUN_PREFIX)
              else f"kappa replay swap --generation {pending.generation}")
    return (f"generation {display(pending.generation)} was made active by run {pending.run_id} but serving was not "
            f"moved to it (interrupted); finish that first with `{finish}`")


def _code_of(events: list[GenerationEvent], generation: str, given: Pipeline) -> Pipeline:
    """A generation is always reconciled by the code that built it (the spec its build recorded, if any)."""
    spec = generations.spec_for(events, generation, "")
    return load_pipeline(spec) if spec else given


def _history(spark, settings: Settings, pipeline: Pipeline) -> list[Decision]:
    gold = {pipeline.tables().gold(g.name) for g in pipeline.gold_tables}
    return [d for d in serving.history(spark, settings) if d.table in gold]


def _reconciled(spark, settings: Settings, target: Target, run_id: str) -> list[ReconciledTable]:
    """The gold rows of the generation's exact reconciliation: what the swapped views read."""
    rows = {r["table"]: r for r in ledger.run_rows(spark, settings, run_id)}
    tables = []
    for gold in target.pipeline.gold_tables:
        row = rows.get(target.pipeline.tables().gold(gold.name))
        if row is None or row["stream_table"] != target.tables.gold(gold.name) or not row["success"]:
            raise ReplayRefused(f"run {run_id} did not reconcile {target.tables.gold(gold.name)} "
                                "exactly; the swap needs every gold table of the generation proven")
        tables.append(ReconciledTable(row["table"], row["stream_table"], row["snapshot_table"],
                                      row["snapshot_version"]))
    return tables


def replay_key(pipeline: str, generation: str) -> str:
    """The incident of a generation that differs from the batch: open until it reconciles or a new one replaces it."""
    return f"replay:{pipeline}:{generation}"


def _alert_failed(spark, settings: Settings, target: Target, result: dict) -> None:
    pipeline, generation = target.pipeline, target.generation
    failed = [t["table"] for t in result["tables"] if not t["success"]]
    raise_alert(spark, settings, Alert(
        severity="warning",
        summary=(f"replay generation {generation} of {pipeline.name} is not served: reconciliation {result['run_id']} "
                 f"found it differs from the batch ({', '.join(failed)})"),
        source=f"kappa replay ({pipeline.name})", dedup_key=replay_key(pipeline.name, generation),
        details={"run_id": result["run_id"], "generation": generation, "failed_tables": failed,
                 "report": str(report_path(settings, pipeline.name, result["run_id"]))},
        runbook=runbook("replay-failed")))
