"""What Airflow tasks call: the platform's commands, each in its own process.

Spark never runs inside the scheduler, the DAG processor or a task's own interpreter: a task runs
``python -m spark_apps.cli ...`` as a child process, streams its output into the task log and reads
the JSON outcome the command writes. This module imports neither Spark nor Kafka.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import PROJECT_ROOT
from spark_apps.orchestration.pipelines import orchestrated_name

log = logging.getLogger(__name__)
EXIT_FAILED = 1
PIPELINE_META = "kappa_pipeline"  # the dbt source meta key that names the pipeline whose serving views it reads


class CommandFailed(PlatformError):
    """A platform command ended with an error; the message carries its last lines of output."""


def audit_run_id(dag_id: str, dag_run) -> str:
    """One reconciliation run id per DAG run: a rerun of the same logical date finds it in the ledger."""
    when = dag_run.logical_date or dag_run.run_after
    return f"{dag_id}.{when:%Y%m%dT%H%M%SZ}"


def as_of(dag_run):
    """The moment a scheduled run audits: the end of its data interval (or when a manual run was due)."""
    return dag_run.data_interval_end or dag_run.logical_date or dag_run.run_after


def run_kappa(*args: str, expect_failure_exit: bool = False) -> dict:
    """Run ``kappa <args> --json <file>`` in a child process and return what it wrote.

    ``expect_failure_exit``: exit code 1 with a JSON outcome is a verdict (e.g. a reconciliation
    mismatch) to act on, not a crash.
    """
    with tempfile.TemporaryDirectory(prefix="kappa-task-") as scratch:
        out = Path(scratch) / "outcome.json"
        code, tail = _run([sys.executable, "-m", "spark_apps.cli", *args, "--json", str(out)])
        if code == 0 or (expect_failure_exit and code == EXIT_FAILED and out.exists()):
            return json.loads(out.read_text()) if out.exists() else {}
    raise CommandFailed(f"kappa {args[0]} exited with {code}: " + " | ".join(tail))


def run_kappa_plain(*args: str) -> None:
    """Run a platform command that reports only through its output and exit code."""
    code, tail = _run([sys.executable, "-m", "spark_apps.cli", *args])
    if code != 0:
        raise CommandFailed(f"kappa {args[0]} exited with {code}: " + " | ".join(tail))


def _run(command: list[str]) -> tuple[int, list[str]]:
    """Stream the child's output into this task's log line by line; keep the last lines for the error."""
    log.info("running %s", " ".join(command))
    tail: deque[str] = deque(maxlen=5)
    with subprocess.Popen(command, cwd=PROJECT_ROOT, env=os.environ.copy(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, bufsize=1) as child:
        for line in child.stdout:
            line = line.rstrip()
            log.info("%s", line)
            if line:
                tail.append(line)
    return child.returncode, list(tail)


def serving_asset(pipeline: str, view: str):
    """The Asset a reconciliation publishes for one served gold table, and downstream DAGs (dbt) schedule on."""
    from airflow.sdk import Asset

    return Asset(name=view, uri=f"kappa://{pipeline}/{view}", group="kappa-serving")


@dataclass(frozen=True)
class DbtSources:
    """The dbt sources one pipeline's models read: their names (to select the models downstream of them) and the
    ``serving.*`` views they declare (what the pipeline's dbt DAG waits for)."""

    sources: tuple[str, ...]
    views: tuple[str, ...]

    @property
    def selector(self) -> str:
        """Every model, test and source downstream of this pipeline's sources, in dbt's selection syntax."""
        return " ".join(f"source:{name}+" for name in self.sources)


def dbt_sources(settings) -> dict[str, DbtSources]:
    """Pipeline name -> the dbt sources in schema ``serving`` the project declares for it (``config.meta`` key
    ``kappa_pipeline``; a source that names none belongs to the settings' pipeline, by the name its DAGs go by)."""
    import yaml

    found: dict[str, tuple[list[str], list[str]]] = {}
    for path in sorted((settings.dbt_project_dir / "models").rglob("*.yml")):
        for source in (yaml.safe_load(path.read_text()) or {}).get("sources", []):
            if source.get("schema", source["name"]) != "serving":
                continue
            meta = {**(source.get("meta") or {}), **((source.get("config") or {}).get("meta") or {})}
            owner = meta.get(PIPELINE_META) or orchestrated_name(settings.pipeline)
            names, views = found.setdefault(owner, ([], []))
            names.append(source["name"])
            views += [f"serving.{table['name']}" for table in source.get("tables", [])]
    if not found:
        raise PlatformError(f"the dbt project {settings.dbt_project_dir} declares no source in schema serving")
    return {pipeline: DbtSources(tuple(names), tuple(views)) for pipeline, (names, views) in sorted(found.items())}


def dag_arguments(settings) -> dict:
    """What every DAG of the platform shares: no backfill, one run at a time, retries and a time limit per task from
    settings (a hung child fails its task instead of blocking the DAG), and a page to on-call when a task finally
    fails, and its incident closed when it (or, for a missed deadline, the DAG's run) succeeds."""
    import datetime as dt

    from spark_apps.orchestration.notifier import KappaAlertNotifier, KappaResolveNotifier, KappaRunResolveNotifier

    return {"start_date": dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "catchup": False, "max_active_runs": 1,
            "on_success_callback": [KappaRunResolveNotifier()],
            "default_args": {"owner": "kappa-platform", "retries": settings.task_retries,
                             "retry_delay": dt.timedelta(seconds=settings.task_retry_delay_s),
                             "execution_timeout": dt.timedelta(seconds=settings.task_timeout_s),
                             "on_failure_callback": [KappaAlertNotifier()],
                             "on_success_callback": [KappaResolveNotifier()]}}
