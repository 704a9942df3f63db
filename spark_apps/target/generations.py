"""Generations of a pipeline's stream tables, and which one is active: recorded state, not a setting.

A Kappa replay builds a new *generation* of every stream table (``gold.merchant_revenue__g2``, its own
checkpoint) beside the one serving, from offset 0 of the log, possibly with new code. Its lifecycle is
appended to ``audit.generations`` (``delta.appendOnly``), one event per step:

    building -> built -> reconciled | failed -> active -> retired | rolled_back

The *active* generation is the one the supervised stream keeps and the hourly reconciliation audits:
the generation of the newest ``active`` event, else the unsuffixed base generation ``""`` every
pipeline starts with. A swap records the new generation active and the old one retired in one
commit; a rollback records the previous one active and the swapped-in one rolled back, also in one
commit. An event keeps the pipeline spec (entry point or ``module:attribute``) that builds the
generation, so old and new code can each keep their own tables: the code is part of a generation.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import asdict, dataclass

from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import Settings
from spark_apps.io.catalog import ensure_table, read_if_present, table_path
from spark_apps.io.catalog_locks import table_write
from spark_apps.pipeline.target import BASE, display

GENERATIONS_TABLE = "audit.generations"
SCHEMA = ("pipeline string, generation string, status string, pipeline_spec string, previous_generation string, "
          "run_id string, reason string, code_version string, recorded_at timestamp")
BUILDING, BUILT, RECONCILED, FAILED, ACTIVE, RETIRED, ROLLED_BACK = (
    "building", "built", "reconciled", "failed", "active", "retired", "rolled_back")
ROLLBACK_RUN_PREFIX = "rollback."
# Generation names become table-name suffixes (gold.x__g2) and checkpoint folder names.
_NAME = re.compile(r"[a-z][a-z0-9]{0,30}")


class ReplayRefused(PlatformError):
    """A replay step that would serve, overwrite or lose the wrong tables; nothing was changed."""


@dataclass(frozen=True)
class GenerationEvent:
    """One step in the life of one generation; ``previous_generation`` is set on ``active`` events."""

    pipeline: str
    generation: str
    status: str
    pipeline_spec: str = ""
    previous_generation: str | None = None
    run_id: str = ""
    reason: str = ""
    code_version: str = ""
    recorded_at: dt.datetime | None = None


def check_name(generation: str) -> str:
    if not _NAME.fullmatch(generation):
        raise ReplayRefused(f"a generation name is a lowercase letter then letters or digits (e.g. g2), "
                            f"got {generation!r}")
    return generation


# ---- pure: the state the events describe (events oldest first) ------------------------------------------------

def latest(events: list[GenerationEvent]) -> dict[str, GenerationEvent]:
    """The newest event of each generation."""
    return {e.generation: e for e in events}


def active_event(events: list[GenerationEvent]) -> GenerationEvent | None:
    """The event that made the active generation active; None while the base generation never stopped serving."""
    newest = latest(events)
    return next((e for e in reversed(events) if e.status == ACTIVE and newest[e.generation] is e), None)


def active_generation(events: list[GenerationEvent]) -> str:
    event = active_event(events)
    return BASE if event is None else event.generation


def next_name(events: list[GenerationEvent]) -> str:
    """``g<n+1>`` after the highest ``g<n>`` ever recorded (names are never reused: old tables are kept)."""
    numbers = [int(e.generation[1:]) for e in events if re.fullmatch(r"g\d+", e.generation)]
    return f"g{max(numbers, default=0) + 1}"


def resumable(events: list[GenerationEvent]) -> str | None:
    """The newest generation whose build was interrupted: a new start resumes it from its checkpoint."""
    building = [e for e in latest(events).values() if e.status == BUILDING]
    return building[-1].generation if building else None


def awaiting(events: list[GenerationEvent], statuses: tuple[str, ...], what: str) -> str:
    """The newest generation in one of ``statuses``, for a command given no ``--generation``."""
    found = [e for e in latest(events).values() if e.status in statuses]
    if not found:
        raise ReplayRefused(f"no generation is {' or '.join(statuses)}; {what}")
    return found[-1].generation


def check_build(events: list[GenerationEvent], generation: str, spec: str) -> None:
    """A replay builds (or resumes) a generation nobody serves and no rollback needs, with the code it started with."""
    event = latest(events).get(generation)
    if event is None:
        return
    if event.status in (ACTIVE, RETIRED, ROLLED_BACK):
        raise ReplayRefused(f"generation {display(generation)} is {event.status}: its tables serve or are kept for "
                            "rollback; a replay builds a new generation")
    started_with = spec_for(events, generation, "")
    if spec and started_with and spec != started_with:
        raise ReplayRefused(f"generation {generation} is built by {started_with}, not {spec}; resume it with that "
                            "code or start a new generation")


def check_status(events: list[GenerationEvent], generation: str, allowed: tuple[str, ...], action: str) -> \
        GenerationEvent:
    """The generation's newest event, or ReplayRefused naming its status and what would be needed."""
    event = latest(events).get(generation)
    if event is None:
        raise ReplayRefused(f"pipeline has no generation {display(generation)}; `kappa replay status` lists them")
    if event.status not in allowed:
        raise ReplayRefused(f"cannot {action} generation {display(generation)}: it is {event.status}"
                            f"{' (run ' + event.run_id + ')' if event.run_id else ''}, needs "
                            f"{' or '.join(allowed)}")
    return event


def unfinished(events: list[GenerationEvent], decided_run_ids: set[str]) -> GenerationEvent | None:
    """An ``active`` event whose serving decisions were never recorded: a swap or rollback interrupted between its
    two commits (generations first, then serving). Running the same command again finishes it."""
    event = active_event(events)
    return event if event is not None and event.run_id not in decided_run_ids else None


def rolled_back_by(events: list[GenerationEvent], run_id: str) -> str:
    """The generation a rollback run moved serving away from."""
    return next(e.generation for e in events if e.status == ROLLED_BACK and e.run_id == run_id)


def swap_run_of(events: list[GenerationEvent], generation: str) -> str | None:
    """The reconciliation run whose swap first made ``generation`` serve (a rollback back to it does not count)."""
    swaps = [e for e in events if e.generation == generation and e.status == ACTIVE
             and not e.run_id.startswith(ROLLBACK_RUN_PREFIX)]
    return swaps[-1].run_id if swaps else None


def previous_of(events: list[GenerationEvent], generation: str) -> str | None:
    """The generation ``generation`` replaced when it last became active (None: the base, never swapped in)."""
    made_active = [e for e in events if e.generation == generation and e.status == ACTIVE]
    return made_active[-1].previous_generation if made_active else None


def spec_for(events: list[GenerationEvent], generation: str, given: str) -> str:
    """The pipeline spec that builds ``generation``: the one its build recorded, else the caller's."""
    recorded = [e.pipeline_spec for e in events if e.generation == generation and e.pipeline_spec]
    return recorded[-1] if recorded else given


# ---- I/O ------------------------------------------------------------------------------------------------------

def read(spark, settings: Settings, pipeline: str) -> list[GenerationEvent]:
    """Every event of the pipeline, oldest first."""
    from pyspark.sql import functions as F

    recorded = read_if_present(spark, settings, GENERATIONS_TABLE)
    if recorded is None:
        return []
    rows = recorded.where(F.col("pipeline") == pipeline).orderBy("recorded_at")
    return [GenerationEvent(**row.asDict()) for row in rows.collect()]


def record(spark, settings: Settings, events: list[GenerationEvent]) -> None:
    """Append events in one commit (a swap's two events land together or not at all)."""
    now = dt.datetime.now(dt.UTC)
    frame = spark.createDataFrame([{**asdict(e), "recorded_at": now} for e in events], SCHEMA)
    ensure_table(spark, settings, GENERATIONS_TABLE, frame.schema, properties={"delta.appendOnly": "true"})
    path = table_path(settings, GENERATIONS_TABLE)
    with table_write(spark, settings, path, "a generation event"):
        frame.write.format("delta").mode("append").save(str(path))


def active(spark, settings: Settings, pipeline: str) -> str:
    return active_generation(read(spark, settings, pipeline))

