"""The public API for declaring a pipeline, and how the engine finds one.

A pipeline names its source topic, its event schema and its gold tables. Each gold table gives:

- ``recompute_keys``: rows that share these are recomputed together (``merchant_id, window_start``);
- ``primary_keys``: the identity of one output row (often the same; a superset for session windows);
- ``key_rows(silver)``: the silver rows that feed the table, with the recompute-key columns added;
- ``compute(rows)``: a deterministic function from those rows to output rows (with ``fold``: to partial rows);
- ``fold`` (optional, :class:`Fold`): the rows of any parts of a key's events fold into the rows of all of them,
  so a micro-batch writes the partial rows of its own events and reads nothing (the table is their fold);
- ``sessions`` (optional, :class:`Sessions`): the rows are gap-bounded sessions of each recompute key;
- ``windows`` (optional, :class:`Windows`): a recompute key is a tumbling event-time window, so the rows of the
  touched windows are read from the files whose times reach them, not from all of silver.

The engine calls the same functions on the events of one micro-batch or of the keys it touches (stream) and on
all events (batch recompute), which is what makes the two comparable exactly.
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
# The column that numbers, per recompute key, the sessions a fold merges rows into.
SESSION = "_session"
# Names the platform keeps for its own columns of the stream's store (``transforms.store``) begin with this, and
# a gold table's columns there are prefixed with its name and this separator.
RESERVED_PREFIX = "_"
COLUMN_SEPARATOR = "__"


@dataclass(frozen=True)
class Sessions:
    """Declares a gold table's rows to be sessions: per recompute key, maximal runs of ``key_rows`` in which each
    row's ``time_column`` is at most ``gap_s`` seconds after the one before, one output row per run, identified by
    the recompute keys and ``start_column`` (the run's first time), with ``end_column`` its last.

    An event can then change only the sessions of its key that come within ``gap_s`` of its time (it joins,
    grows or bridges them, or, removed, splits one). The sessions of a set of events are the sessions of any split
    of it, merged where they come within ``gap_s`` (``transforms.sessions``): with a :class:`Fold`, the sessions of
    each micro-batch's events fold into the sessions of the whole log, however long one runs (a customer who never
    pauses has one session as long as the log).

    ``combine`` is accepted for pipelines declared before folds and no longer used: a :class:`Fold` on the table
    is what extends stored sessions by new events; without one, touched sessions are recomputed from their events.
    """

    gap_s: int
    time_column: str = "event_time"
    start_column: str = "session_start"
    end_column: str = "session_end"
    combine: DataFrameFn | None = None


@dataclass(frozen=True)
class Fold:
    """Declares a gold table's rows to fold: ``compute`` of any parts of a key's events gives partial rows, and the
    partial rows of all the parts, merged, give the rows ``compute`` of all the events would, finished by
    ``output``.

    ``merge``: SQL aggregate expressions, each ``expression AS column``, over the partial rows of one primary key
    (for :class:`Sessions`, of one merged session: its start and end are merged by the platform), giving every
    partial column but the keys. ``output``: SQL expressions over a merged row giving the table's columns, in order
    (empty: the partial columns themselves). Both are SQL because the table is a view that folds the partial rows
    the stream wrote, read by any SQL client; the batch recompute folds its partial rows with the same text.

    What it buys: the stream writes the partial rows of each micro-batch's own events and never reads back a key's
    earlier events. Sums, counts, least and greatest values and unions of sets fold; a distinct count needs its set
    kept as a partial column (``merchant_revenue`` keeps its customers). A wrong fold shows as a mismatch in the
    audit, which recomputes every table from all of its events.
    """

    merge: tuple[str, ...]
    output: tuple[str, ...] = ()


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
    """One derived table: a function of silver's on-time events, per key."""

    name: str
    recompute_keys: tuple[str, ...]
    primary_keys: tuple[str, ...]
    key_rows: DataFrameFn
    compute: DataFrameFn
    description: str = ""
    # Accepted for pipelines declared before retractions became data: every gold table's changes, retractions
    # included, are now derived from its view (``io.stream_store.changes``), whatever this says.
    change_data_feed: bool = True
    sessions: Sessions | None = None
    windows: Windows | None = None
    fold: Fold | None = None

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
        if not self.name.isidentifier() or self.name.startswith(RESERVED_PREFIX) or COLUMN_SEPARATOR in self.name:
            raise PlatformError(f"gold table name {self.name!r}: letters, digits and single underscores, not "
                                f"starting with {RESERVED_PREFIX!r} (the stream's store prefixes its columns with it)")
        if self.fold is not None and not self.fold.merge:
            raise PlatformError(f"gold table {self.name!r}: a fold needs merge expressions")


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
        reserved = [spec.name for spec in self.schema.fields
                    if spec.name.startswith(RESERVED_PREFIX) or COLUMN_SEPARATOR in spec.name]
        if reserved:
            raise PlatformError(f"pipeline {self.name!r}: event field names may not start with {RESERVED_PREFIX!r} "
                                f"or hold {COLUMN_SEPARATOR!r}, which the stream's store keeps for its own columns: "
                                f"{', '.join(reserved)}")
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
        """Every table the stream keeps, by the names readers use (each a view of its store): records, silver, gold,
        and the commit log last."""
        names = self.tables(generation).views([table.name for table in self.gold_tables])
        return names if commit_log else names[:-1]


@dataclass(frozen=True)
class TableNames:
    """Fully qualified names of the tables one pipeline's stream maintains.

    The stream writes one Delta table, its ``store``: every micro-batch is one commit of it. Every other name is a
    view of the store (``transforms.store``). ``generation`` suffixes every name, so a replay can build a new set
    beside the old one.
    """

    prefix: str = ""
    generation: str = ""

    def _name(self, schema: str, table: str) -> str:
        suffix = f"__{self.generation}" if self.generation else ""
        return f"{schema}.{self.prefix}{table}{suffix}"

    @property
    def store(self) -> str:
        """The one Delta table the stream writes: records, gold rows and commit rows, by kind."""
        return self._name("stream", "micro_batches")

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
        return self._name("stream", "dead_letters")

    @property
    def commits(self) -> str:
        return self._name("stream", "commits")

    def gold(self, name: str) -> str:
        return self._name("gold", name)

    def views(self, gold_tables: list[str]) -> list[str]:
        """Every view of the store, records first and the commit log last."""
        return [self.bronze, self.dead_letters, self.candidates, self.events, self.late_events, self.duplicates,
                *[self.gold(name) for name in gold_tables], self.commits]


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
