"""The public API for declaring a pipeline, and how the engine finds one.

A pipeline names its source topic, its event schema and its gold tables. Each gold table gives:

- ``recompute_keys``: rows that share these are recomputed together (``merchant_id, window_start``);
- ``primary_keys``: the identity of one output row (often the same; a superset for session windows);
- ``key_rows(silver)``: the silver rows that feed the table, with the recompute-key columns added;
- ``compute(rows)``: a deterministic function from those rows to output rows;
- ``sessions`` (optional, :class:`Sessions`): the rows are gap-bounded sessions of each recompute key, so only
  the sessions within one gap of a touched event are recomputed, not all of the key's (and, with ``combine``,
  the stream and the incremental audit extend them from their stored rows, not from their events);
- ``windows`` (optional, :class:`Windows`): a recompute key is a tumbling event-time window, so the rows of the
  touched windows are read from the files whose times reach them, not from all of silver.

The engine calls the same two functions on the rows of the keys a micro-batch touches (stream) and
on all rows (batch recompute), which is what makes the two comparable exactly.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path

from spark_apps.core.errors import PlatformError
from spark_apps.pipeline.event_schema import EventSchema
from spark_apps.pipeline.lateness import Lateness, LatenessRule
from spark_apps.pipeline.synthetic import EventGenerator

ENTRY_POINT_GROUP = "kappa.pipelines"
DataFrameFn = Callable[..., object]


# The columns a key's span of sessions comes in (``transforms.sessions``): its first and last time to recompute.
SPAN_LO, SPAN_HI = "_span_lo", "_span_hi"
# The column that numbers, per recompute key, the sessions a ``Sessions.combine`` folds rows into.
SESSION = "_session"


@dataclass(frozen=True)
class Sessions:
    """Declares a gold table's rows to be sessions: per recompute key, maximal runs of ``key_rows`` in which each
    row's ``time_column`` is at most ``gap_s`` seconds after the one before, one output row per run, identified by
    the recompute keys and ``start_column`` (the run's first time), with ``end_column`` its last.

    An event can then change only the sessions of its key that come within ``gap_s`` of its time (it joins,
    grows or bridges them, or, removed, splits one), so a micro-batch recomputes those sessions from the events
    between their bounds, not every session of the key: a customer's whole history stays untouched.

    ``combine`` (optional) folds rows of the table into sessions: given rows that carry the recompute keys and
    ``SESSION``, one row per (keys, ``SESSION``), as ``compute`` would give for the union of their events (sums of
    counts, the least start, the greatest end, columns derived from those). Sessions of a set of events are then
    the sessions of any split of it, merged where they come within ``gap_s`` (``transforms.sessions``), so events
    added after a session (a customer who never pauses has one session as long as the log) extend its stored row
    instead of recomputing it from every event in it. A wrong ``combine`` shows as a mismatch in the audit.
    """

    gap_s: int
    time_column: str = "event_time"
    start_column: str = "session_start"
    end_column: str = "session_end"
    combine: DataFrameFn | None = None


@dataclass(frozen=True)
class Windows:
    """Declares the recompute key ``start_column`` to be a tumbling window of ``key_rows``: each row's
    ``time_column`` floored to a multiple of ``width_s`` seconds since the epoch. The rows of a set of windows then
    all have times between the first window's start and the last one's end, so a micro-batch reads silver with that
    bound and Delta skips every file whose times lie outside it (files are written in log order, so nearly all).
    A wrong declaration drops rows from the recompute, which the audit reports as a mismatch."""

    width_s: int
    time_column: str = "event_time"
    start_column: str = "window_start"


@dataclass(frozen=True)
class GoldTable:
    """One derived table, recomputed per key from silver."""

    name: str
    recompute_keys: tuple[str, ...]
    primary_keys: tuple[str, ...]
    key_rows: DataFrameFn
    compute: DataFrameFn
    description: str = ""
    change_data_feed: bool = True
    sessions: Sessions | None = None
    windows: Windows | None = None

    def __post_init__(self) -> None:
        if not self.recompute_keys or not set(self.recompute_keys) <= set(self.primary_keys):
            raise PlatformError(f"gold table {self.name!r}: recompute_keys must be a non-empty subset of "
                                "primary_keys")
        if self.sessions and set(self.primary_keys) != {*self.recompute_keys, self.sessions.start_column}:
            raise PlatformError(f"gold table {self.name!r}: a table of sessions is keyed by its recompute_keys "
                                f"and its sessions' start_column ({self.sessions.start_column!r}), nothing else")
        if self.windows and (self.sessions or self.windows.start_column not in self.recompute_keys
                             or self.windows.width_s <= 0):
            raise PlatformError(f"gold table {self.name!r}: windows need a positive width_s and their start_column "
                                f"({self.windows.start_column!r}) among the recompute_keys, and exclude sessions")


@dataclass(frozen=True)
class Pipeline:
    """A declared pipeline. ``table_prefix`` keeps several pipelines apart in one warehouse.

    ``lateness`` (see :mod:`spark_apps.pipeline.lateness`) says when an event is late: by default against its
    log append time, with ``KAPPA_ALLOWED_LATENESS_S``.

    ``generator`` (optional) produces the pipeline's own synthetic events, each labelled with what it must
    become (see :mod:`spark_apps.pipeline.synthetic`): ``kappa produce`` without ``--file`` and the chaos lab
    need one.
    """

    name: str
    schema: EventSchema
    gold_tables: tuple[GoldTable, ...]
    topic: str | None = None
    table_prefix: str = ""
    description: str = ""
    lateness: Lateness = Lateness()
    generator: EventGenerator | None = field(default=None, compare=False)
    gold_by_name: dict[str, GoldTable] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [table.name for table in self.gold_tables]
        if len(set(names)) != len(names):
            raise PlatformError(f"pipeline {self.name!r} declares a gold table twice: {names}")
        object.__setattr__(self, "gold_by_name", {table.name: table for table in self.gold_tables})

    def source_topic(self, settings) -> str:
        return self.topic or settings.events_topic

    def lateness_rule(self, settings) -> LatenessRule:
        """The pipeline's lateness rule, its allowed lateness defaulting to ``KAPPA_ALLOWED_LATENESS_S``."""
        return self.lateness.rule(settings)

    def require_generator(self, purpose: str) -> EventGenerator:
        """The pipeline's generator, or the one-line error that says ``purpose`` needs one."""
        if self.generator is None:
            raise PlatformError(f"pipeline {self.name!r} declares no generator of synthetic events, which "
                                f"{purpose} needs")
        return self.generator

    def tables(self, generation: str = "") -> TableNames:
        return TableNames(self.table_prefix, generation)

    def stream_table_names(self, generation: str = "", commit_log: bool = True) -> list[str]:
        """Every Delta table the stream writes, in the order a micro-batch commits them (the commit log last)."""
        names = self.tables(generation).in_write_order([table.name for table in self.gold_tables])
        return names if commit_log else names[:-1]

    def derived_table_names(self, generation: str = "") -> list[str]:
        """The silver tables that are views of the stream's tables, not written by it (``TableNames.derived``)."""
        return self.tables(generation).derived()


@dataclass(frozen=True)
class TableNames:
    """Fully qualified names of the tables one pipeline's stream maintains.

    ``generation`` suffixes every stream table, so a replay can build a new set beside the old one.
    """

    prefix: str = ""
    generation: str = ""

    def _name(self, schema: str, table: str) -> str:
        suffix = f"__{self.generation}" if self.generation else ""
        return f"{schema}.{self.prefix}{table}{suffix}"

    @property
    def bronze(self) -> str:
        return self._name("bronze", "events_raw")

    @property
    def candidates(self) -> str:
        return self._name("silver", "event_candidates")

    @property
    def events(self) -> str:
        return self._name("silver", "events")

    @property
    def late_events(self) -> str:
        return self._name("silver", "late_events")

    @property
    def duplicates(self) -> str:
        return self._name("silver", "duplicates")

    @property
    def dead_letters(self) -> str:
        return self._name("audit", "dead_letters")

    @property
    def commits(self) -> str:
        return self._name("audit", "stream_commits")

    def gold(self, name: str) -> str:
        return self._name("gold", name)

    def in_write_order(self, gold_tables: list[str]) -> list[str]:
        """The stream's tables in commit order: the commit log comes last, so it never runs ahead of a table."""
        return [self.bronze, self.dead_letters, self.candidates, self.events,
                *[self.gold(name) for name in gold_tables], self.commits]

    def derived(self) -> list[str]:
        """Views over the candidates and events, never written by the stream: the late events (events flagged
        late) and the duplicates (every candidate but its event's winner). A micro-batch that commits the two
        tables below them has updated them too, in the same commits."""
        return [self.late_events, self.duplicates]


def registered_pipelines() -> list[str]:
    """The names of every pipeline installed under the entry-point group, sorted."""
    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


def load_pipeline(spec: str) -> Pipeline:
    """Find a pipeline by entry-point name (group ``kappa.pipelines``) or by ``module:attribute``."""
    target = spec
    if ":" not in spec:
        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == spec]
        if not found:
            known = registered_pipelines()
            raise PlatformError(f"no pipeline named {spec!r}; registered: {', '.join(known) or 'none'} "
                                "(or give module:attribute)")
        target = found[0].value
    module_name, _, attribute = target.partition(":")
    if not all(part.isidentifier() for part in (*module_name.split("."), attribute)):
        raise PlatformError(f"cannot load pipeline {target!r}: give module:attribute, e.g. my_pipeline:PIPELINE "
                            "(a dotted module name, no relative import)")
    try:
        pipeline = getattr(_import_from_working_directory(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise PlatformError(f"cannot load pipeline {target!r}: {exc}. A module:attribute pipeline is imported "
                            f"from the working directory ({Path.cwd()}) or PYTHONPATH; run from the folder "
                            "that holds the module, or register it under the entry-point group "
                            f"{ENTRY_POINT_GROUP!r}") from None
    except Exception as exc:  # noqa: BLE001 - the user's module failed as it ran: say where, in one line
        raise PlatformError(f"cannot load pipeline {target!r}: importing {module_name} raised "
                            f"{type(exc).__name__}: {exc} ({_where(exc)})") from None
    if not isinstance(pipeline, Pipeline):
        raise PlatformError(f"{target!r} is a {type(pipeline).__name__}, not a Pipeline")
    return pipeline


def _where(exc: BaseException) -> str:
    """Where an import failed: the file and line of a syntax error, else of the innermost frame that raised."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}"
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "at import"


def _import_from_working_directory(module_name: str):
    """Import ``module_name`` as Python would for a script run in the working directory: the ``kappa`` console
    script does not put the working directory on ``sys.path``, so a user's ``my_pipeline.py`` needs it added."""
    working = str(Path.cwd())
    if working not in sys.path:
        sys.path.append(working)
    return importlib.import_module(module_name)
