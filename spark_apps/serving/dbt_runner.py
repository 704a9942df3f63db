"""dbt over the reconciled serving views, on the platform's own SparkSession.

``dbt_project/profiles.yml`` uses dbt-spark's in-process ``session`` connection by default: dbt runs its SQL on
the SparkSession already running in this process. Starting that session with ``get_spark`` first
gives dbt the same Delta configuration, jars and shared catalog as every app, plus the
``serving.*`` views as the serving state says, with nothing repeated in dbt's profile. Its ``thrift`` target runs
the same project on the SQL endpoint instead (``services.sql_endpoint``), which reads the same catalog.

Two rules guard what analysts read:

- dbt refuses to run while a gold table has never been reconciled, or while its view still reads the
  stream table although the table's latest reconciliation failed (a failure switches the view to the
  batch snapshot; until that happened, the models would be built on unproven data);
- a failed dbt test, model or stale source pages on-call through the alerts module.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from spark_apps.alerts.alert import Alert, runbook
from spark_apps.alerts.dispatch import raise_alert, resolve
from spark_apps.audit.ledger import latest_runs
from spark_apps.core.errors import PlatformError
from spark_apps.core.paths import dbt_log, dbt_target
from spark_apps.core.settings import Settings
from spark_apps.io import serving_cut
from spark_apps.io.catalog import forget_foreign_tables
from spark_apps.pipeline.declaration import Pipeline
from spark_apps.serving import state as serving
from spark_apps.serving.state import KAPPA

log = logging.getLogger(__name__)
# A selection term's graph operators: ``+`` with an optional depth on either side, or a leading ``@``.
GRAPH_OPERATORS = re.compile(r"^(\d*\+|@)|\+\d*$")
FAILED_STATUSES = frozenset({"error", "fail", "runtime error"})
# `kappa dbt <action>`: the dbt commands the platform runs.
COMMANDS = {"build": ["build"], "run": ["run"], "test": ["test"], "freshness": ["source", "freshness"],
            "docs": ["docs", "generate", "--static"]}
# dbt commands that read the serving views; `docs generate` and `parse` only describe the project.
# The schema of the project's marts (dbt_project.yml), Delta tables under this warehouse's marts.db.
MARTS_SCHEMA = "marts"
READING_COMMANDS = frozenset({"build", "run", "test", "seed", "snapshot", "source", "show"})


class DbtRefused(PlatformError):
    """dbt was not started: some gold table's serving view is not backed by a passing reconciliation."""


@dataclass(frozen=True)
class NodeResult:
    """One dbt node's outcome: a model, a data test, a unit test or a source freshness check."""

    unique_id: str
    resource_type: str
    status: str
    failures: int | None
    message: str

    @property
    def failed(self) -> bool:
        return self.status in FAILED_STATUSES


@dataclass
class DbtOutcome:
    command: str
    success: bool
    results: list[NodeResult] = field(default_factory=list)
    served: dict[str, str] = field(default_factory=dict)  # view -> what it reads, e.g. batch.x@v3
    error: str = ""
    target_dir: str = ""

    @property
    def failed(self) -> list[NodeResult]:
        return [r for r in self.results if r.failed]

    def counts(self) -> dict[str, int]:
        tally: dict[str, int] = {}
        for r in self.results:
            tally[r.status] = tally.get(r.status, 0) + 1
        return tally

    def as_json(self) -> dict:
        return {"command": self.command, "success": self.success, "counts": self.counts(), "served": self.served,
                "error": self.error, "target_dir": self.target_dir,
                "failed": [{"node": r.unique_id, "type": r.resource_type, "status": r.status,
                            "failures": r.failures, "message": r.message} for r in self.failed]}


def refusals(gold_views: Mapping[str, str], served: Mapping[str, tuple[str, str]],
             latest: Mapping[str, tuple[str, bool]]) -> list[str]:
    """Why dbt must not run, one line per gold table; empty when every view is backed by a reconciliation.

    ``gold_views``: gold table -> serving view; ``served``: gold table -> (mode, source table) of its
    newest serving decision; ``latest``: stream table -> (run id, success) of its newest reconciliation. Keyed by
    the stream table, so a failed replay generation (``gold.x__g3``) does not block views that read another one.
    """
    reasons = []
    for table, view in sorted(gold_views.items()):
        if table not in served:
            reasons.append(f"{view}: no reconciliation has decided what it serves yet; run `kappa reconcile`")
            continue
        mode, source = served[table]
        run_id, success = latest.get(source, ("", True))
        if not success and mode == KAPPA:
            reasons.append(f"{view} still reads the stream table {source}, but its latest reconciliation {run_id} "
                           f"failed; run `kappa serving advance --run-id {run_id}` to switch it to the batch snapshot")
    return reasons


def check_sources(spark, settings: Settings, pipeline: Pipeline) -> dict[str, str]:
    """What each serving view reads, or DbtRefused when dbt must not build on it."""
    tables = pipeline.tables()
    gold_views = {tables.gold(g.name): serving.serving_view(tables.gold(g.name)) for g in pipeline.gold_tables}
    decisions = serving.current(spark, settings, pipeline.name)
    reasons = refusals(gold_views, {t: (d.mode, d.source_table) for t, d in decisions.items()},
                       latest_runs(spark, settings, pipeline.name))
    if reasons:
        raise DbtRefused("dbt refused: " + "; ".join(reasons))
    return {gold_views[t]: serving.served_from(d) for t, d in sorted(decisions.items()) if t in gold_views}


def command_args(action: str, select: str | None = None, target: str | None = None) -> list[str]:
    """The dbt arguments of ``kappa dbt <action> [--select ...] [--target ...]``."""
    if action not in COMMANDS:
        raise PlatformError(f"unknown dbt action {action!r}; one of {', '.join(COMMANDS)}")
    return [*COMMANDS[action], *(["--select", select] if select else []), *(["--target", target] if target else [])]


def run_action(spark, settings: Settings, pipeline: Pipeline, action: str, select: str | None = None,
               target: str | None = None) -> DbtOutcome:
    """:func:`run_dbt` of one of the platform's dbt actions (``build``, ``freshness``, ``docs`` ...), on the
    profile's ``target`` (``session`` when None)."""
    return run_dbt(spark, settings, pipeline, command_args(action, select, target))


def run_steps(spark, settings: Settings, pipeline: Pipeline, actions: Sequence[str], select: str | None = None,
              target: str | None = None) -> list[dict]:
    """Several dbt actions one after the other on one SparkSession (one process, one JVM), each one's outcome as
    JSON. A failed or refused step does not stop the next: `docs` still describes the project after a failed build,
    and each reading step checks the serving views again (and refuses again, paging once per step as before)."""
    steps = []
    for action in actions:
        try:
            steps.append(run_action(spark, settings, pipeline, action, select, target).as_json())
        except DbtRefused as refused:
            steps.append({"command": " ".join(command_args(action, select, target)), "success": False,
                          "refused": str(refused)})
    return steps


def run_dbt(spark, settings: Settings, pipeline: Pipeline, args: Sequence[str]) -> DbtOutcome:
    """Run one dbt command (``build``, ``test``, ``source freshness``, ``docs generate`` ...) on ``spark``.

    Refuses (and alerts) before reading unreconciled data; alerts when a node fails.
    """
    if not args:
        raise PlatformError("name a dbt command, e.g. `kappa dbt build`")
    command = " ".join(a for a in args[:2] if not a.startswith("-"))
    served: dict[str, str] = {}
    if args[0] in READING_COMMANDS:
        try:
            served = check_sources(spark, settings, pipeline)
        except DbtRefused as refused:
            _alert(spark, settings, pipeline, "warning", f"dbt {command} refused", str(refused), {})
            raise
        log.info("dbt %s over %s", command, ", ".join(f"{v} <- {s}" for v, s in served.items()))
    # Every command sees the views as the serving state says: `docs generate` introspects them too.
    serving.register_views(spark, settings, pipeline)
    # The marts are dbt's tables in this warehouse: a name another warehouse registered on the catalog is let go.
    forget_foreign_tables(spark, settings, MARTS_SCHEMA)
    # Holding the serving lock keeps the cut where it is for the whole run: every model reads the same log prefix.
    with serving_cut.locked(settings, pipeline.name):
        outcome = _views_first(settings, pipeline, list(args)) or _invoke(settings, pipeline, list(args))
    outcome.served = served
    if not outcome.success:
        failed = outcome.failed
        summary = (f"dbt {command}: {len(failed)} failed - " + ", ".join(r.unique_id for r in failed[:5])
                   if failed else f"dbt {command} failed: {outcome.error or 'see the dbt log'}")
        _alert(spark, settings, pipeline, "critical", summary, outcome.error, outcome.as_json())
    elif args[0] in READING_COMMANDS:
        resolve(settings, dbt_key(pipeline.name), f"dbt ({pipeline.name})", f"dbt {command} succeeded", spark)
    return outcome


def _views_first(settings: Settings, pipeline: Pipeline, args: list[str]) -> DbtOutcome | None:
    """A selective run creates the staging views its selection reads (or holds) first: they are not Delta tables,
    so a catalog that never had them (a fresh one) or has an older definition would fail or mislead the run.
    Returns the failed outcome if that fails."""
    if args[0] not in {"build", "run", "test", "show"} or "--select" not in args:
        return None
    target = args[args.index("--target"):args.index("--target") + 2] if "--target" in args else []
    views = _invoke(settings, pipeline, ["run", "--select", *view_selection(args[args.index("--select") + 1].split()),
                                         *target])
    return None if views.success else views


def view_selection(selection: list[str]) -> list[str]:
    """The views a selection may read, in dbt's selection syntax: per term, the views among its node, its
    descendants and every ancestor of those (``@``), whatever graph operators the term had (``+m``, ``m+``,
    ``2+m+1``), and for each part of an intersection. It may select a few views more than needed, never fewer: a
    model downstream of a source can read a view that is not."""
    return [f"config.materialized:view,@{GRAPH_OPERATORS.sub('', part)}"
            for term in selection for part in term.split(",")]


def _invoke(settings: Settings, pipeline: Pipeline, args: list[str]) -> DbtOutcome:
    from dbt.cli.main import dbtRunner

    target, logs = dbt_target(settings, pipeline.name), dbt_log(settings, pipeline.name)
    target.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    project = str(settings.dbt_project_dir)
    full = [*args, "--project-dir", project, "--profiles-dir", project,
            "--target-path", str(target), "--log-path", str(logs)]
    with _environment(settings):
        result = dbtRunner().invoke(full)
    nodes = [_node(r) for r in getattr(result.result, "results", None) or []]
    error = "" if result.exception is None else f"{type(result.exception).__name__}: {result.exception}"
    return DbtOutcome(command=" ".join(args), success=bool(result.success), results=nodes, error=error,
                      target_dir=str(target))


def _node(result) -> NodeResult:
    node = result.node
    return NodeResult(unique_id=node.unique_id, resource_type=str(node.resource_type),
                      status=str(result.status), failures=getattr(result, "failures", None),
                      message=str(getattr(result, "message", "") or ""))


@contextmanager
def _environment(settings: Settings) -> Iterator[None]:
    """The ``KAPPA_*`` variables the project's YAML reads (``env_var``); no usage tracking, no colours in logs."""
    wanted = {**settings.as_env(), "DO_NOT_TRACK": "1", "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
              "DBT_USE_COLORS": str(sys.stdout.isatty()).lower()}
    saved = {key: os.environ.get(key) for key in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def dbt_key(pipeline: str) -> str:
    """The incident of a dbt command that failed or was refused: open until a command that reads the views succeeds."""
    return f"dbt:{pipeline}"


def _alert(spark, settings: Settings, pipeline: Pipeline, severity: str, summary: str, error: str,
           details: dict) -> None:
    raise_alert(spark, settings, Alert(
        severity=severity, summary=summary, source=f"dbt ({pipeline.name})", dedup_key=dbt_key(pipeline.name),
        details={**details, "error": error, "dbt_log": str(dbt_log(settings, pipeline.name) / "dbt.log")},
        runbook=runbook("dbt-failed")))


