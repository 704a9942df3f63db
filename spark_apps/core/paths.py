"""Where the platform puts what people and other processes look for: one rule per path.

The stream writes its heartbeat where the supervisor reads it; the auditor writes the page that alerts
and the ledger link to; dbt writes the docs the report links to. Each path is derived here only.
"""

from __future__ import annotations

import json
from pathlib import Path

from spark_apps.core.object_path import Location
from spark_apps.core.settings import Settings


def heartbeat_path(settings: Settings, pipeline: str) -> Path:
    """The stream's last batch, offsets, lag and rates, rewritten every half stall interval."""
    return settings.run_dir / f"{pipeline}.heartbeat.json"


def forget_ending(heartbeat: Path) -> None:
    """A new run of the stream begins: its heartbeat no longer says that the last run ended as asked, so a run that
    dies before its first beat is judged down, not stopped."""
    try:
        beat = json.loads(heartbeat.read_text())
    except (OSError, ValueError):
        return
    if isinstance(beat, dict) and beat.get("ended"):
        write_json_whole(heartbeat, {**beat, "ended": None})


def write_json_whole(path: Path, payload: dict) -> None:
    """Write a JSON file whole or not at all, for files another process reads at any moment (a heartbeat the
    supervisor reads, the open incidents every alerting process reads)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = path.with_suffix(".tmp")
    fresh.write_text(json.dumps(payload, indent=2, default=str))
    fresh.replace(path)


def checkpoint_path(settings: Settings, pipeline: str, table_prefix: str = "", generation: str = "") -> Location:
    """The streaming query's checkpoint: one per pipeline, table prefix and replay generation."""
    suffix = f"__{generation}" if generation else ""
    return settings.checkpoint_root / f"{table_prefix}{pipeline}{suffix}"


def report_path(settings: Settings, pipeline: str, run_id: str) -> Path:
    """A reconciliation run's page; alerts and JSON outputs link it before or after it exists."""
    return settings.reports_dir / "reconciliation" / f"{pipeline}-{run_id}.html"


def overview_path(settings: Settings, pipeline: str) -> Path:
    """A pipeline's overview page: its history at a glance, rewritten after every reconciliation."""
    return settings.reports_dir / "overview" / f"{pipeline}.html"


def latest_report_path(settings: Settings, pipeline: str) -> Path:
    """A copy of the newest reconciliation page of a pipeline, at a stable address."""
    return settings.reports_dir / "reconciliation" / f"{pipeline}-latest.html"


def dbt_target(settings: Settings, pipeline: str) -> Path:
    """dbt's artifacts for one pipeline's runs: each pipeline's dbt DAG runs beside the others, and two dbt runs
    sharing a target folder overwrite each other's run results, manifest and partial parse."""
    return settings.dbt_target_dir / pipeline


def dbt_log(settings: Settings, pipeline: str) -> Path:
    """The folder of one pipeline's dbt log (``dbt.log``)."""
    return settings.dbt_log_dir / pipeline


def dbt_docs_index(settings: Settings, pipeline: str) -> Path:
    """The single-file dbt docs site ``kappa dbt docs`` writes for a pipeline (``dbt docs generate --static``)."""
    return dbt_target(settings, pipeline) / "static_index.html"
