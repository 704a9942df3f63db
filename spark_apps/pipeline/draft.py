"""A first pipeline drafted from a file's first rows: what `kappa init NAME --from FILE` writes.

Each column gets the narrowest field kind its values take (true/false, a whole number, a decimal, any number, a
date, an ISO-8601 time with an offset, else text). A kind that nine in ten of a column's values take is still
chosen, and the rest are named: the stream will dead-letter those events as ``wrong_type:<field>``. The event id,
event time and key columns are guessed from names and values unless the user names them, and every guess is
said. A file whose events are mostly older than the allowed lateness is a history, so the draft measures
lateness against the log's high-water mark. The draft's one gold table counts events per key and day and folds,
so the stream appends and never reads a key back.

Pure: it takes the sampled values and returns text; reading the file and writing the modules is the caller's.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import keyword
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from spark_apps.core.errors import PlatformError
from spark_apps.pipeline.lateness import is_history

# Kinds in the order a column's values are tried: the first that every value (or nine in ten) takes wins.
PREFERENCE = ("boolean", "long", "decimal", "double", "date", "timestamp", "string")
FIT_SHARE = 0.9
TYPE_FIELD, VERSION_FIELD = "event_type", "schema_version"
# Decimal columns hold at least this many digits in all, so that larger values than the sample's still fit.
DECIMAL_DIGITS = 18
MEASURES = 3  # numeric columns the draft's gold table aggregates
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}(:?\d{2})?)")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_PLAIN_NUMBER = re.compile(r"[+-]?\d+(\.\d+)?")
_NAME = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")
# What a field may be called: the stream's store keeps a leading underscore and a double one for its own columns.
_FIELD = re.compile(r"[A-Za-z][A-Za-z0-9]*(_[A-Za-z0-9]+)*")
_LONG_RANGE = range(-(2**63), 2**63)


@dataclass(frozen=True)
class Column:
    """One column's drafted field: its kind, whether every sampled row has it, and the values that took no kind."""

    name: str
    kind: str
    required: bool
    distinct: int
    precision: int | None = None
    scale: int | None = None
    misfits: int = 0
    examples: tuple[str, ...] = ()


@dataclass(frozen=True)
class Draft:
    """A pipeline to write: its columns, the guessed id, time and key, and what the user should be told."""

    name: str
    source: str
    rows: int
    columns: tuple[Column, ...]
    id_field: str
    time_field: str
    key_field: str | None
    event_types: tuple[str, ...]
    versions: tuple[int, ...]
    history: bool
    notes: tuple[str, ...]

    @property
    def by_name(self) -> dict[str, Column]:
        return {column.name: column for column in self.columns}

    @property
    def table(self) -> str:
        return f"{self.key_field.removesuffix('_id')}_daily" if self.key_field else "daily"

    @property
    def day(self) -> str:
        """The day column ``key_rows`` adds: a name no column of the file has."""
        return next(name for name in ("day", "event_day", "event_date", "utc_day") if name not in self.by_name)

    @property
    def count(self) -> str:
        """The count column: the pipeline's name, unless the table's other columns take it."""
        taken = {*self.group, *(alias for _, _, alias in self.measures)}
        return next(name for name in (self.name, "events", "event_count", "counted_events") if name not in taken)

    @property
    def group(self) -> tuple[str, ...]:
        return (self.key_field, self.day) if self.key_field else (self.day,)

    @property
    def measures(self) -> list[tuple[str, str, str]]:
        """The gold table's aggregates after its count: (function, column, alias) for the first few number
        columns that are not the id, the key, the type or version, or named like an id; sums only where they are
        exact."""
        numbers = [c for c in self.columns if c.kind in ("long", "decimal", "double")
                   and c.name not in (self.id_field, self.key_field, TYPE_FIELD, VERSION_FIELD)
                   and not _id_like(c.name)][:MEASURES]
        return [(function, c.name, f"{function}_{c.name}") for c in numbers
                for function in (("min", "max", "sum") if c.kind != "double" else ("min", "max"))]


def value_fits(value: Any, text_typed: bool) -> dict[str, tuple[int, int] | None]:
    """The kinds one value can be read as, each with (integer digits, scale) for a decimal. ``text_typed``: a text
    value is typed as a CSV cell is (the producer does so for CSV and Parquet text), else only times are read
    from text, as the stream's parser reads a JSON string."""
    if isinstance(value, bool):
        return {"boolean": None}
    if isinstance(value, int):
        return _number_fits(Decimal(value), value in _LONG_RANGE)
    if isinstance(value, Decimal):
        return _number_fits(value, False) if value.is_finite() else {}
    if isinstance(value, float):
        return {"double": None} if value == value and abs(value) != float("inf") else {}
    if isinstance(value, dt.datetime):
        return {"timestamp": None}
    if isinstance(value, dt.date):
        return {"date": None}
    if not isinstance(value, str):
        return {}
    text = value.strip()
    fits: dict[str, tuple[int, int] | None] = {"string": None}
    if _TIME.fullmatch(text) and _parses(dt.datetime.fromisoformat, text):
        fits["timestamp"] = None
    elif _DATE.fullmatch(text) and _parses(dt.date.fromisoformat, text):
        fits["date"] = None
    if not text_typed:
        return fits
    if text.lower() in ("true", "false"):
        fits["boolean"] = None
    elif _PLAIN_NUMBER.fullmatch(text):
        number = Decimal(text)
        fits.update(_number_fits(number, number == number.to_integral_value() and "." not in text
                                 and int(number) in _LONG_RANGE))
    elif _parses(float, text) and abs(float(text)) != float("inf") and float(text) == float(text):
        fits["double"] = None
    return fits


def _parses(parse, text: str) -> bool:
    try:
        parse(text)
    except (ValueError, OverflowError):
        return False
    return True


def _number_fits(number: Decimal, whole: bool) -> dict[str, tuple[int, int] | None]:
    fits: dict[str, tuple[int, int] | None] = {"double": None}
    if whole:
        fits["long"] = None
    sign, digits, exponent = number.as_tuple()
    if isinstance(exponent, int) and "E" not in str(number):
        scale = max(0, -exponent)
        fits["decimal"] = (max(1, len(digits) - scale), scale)
    return fits


def infer_column(name: str, values: Sequence[Any], text_typed: bool) -> Column:
    """The kind a column's sampled values take (``None`` is a row without it)."""
    present = [value for value in values if value is not None]
    fits = [value_fits(value, text_typed) for value in present]
    distinct = len({repr(value) for value in present})
    for kind in PREFERENCE:
        taking = [fit[kind] for fit in fits if kind in fit]
        if present and len(taking) >= FIT_SHARE * len(present):
            misfits = [value for value, fit in zip(present, fits, strict=True) if kind not in fit]
            precision = scale = None
            if kind == "decimal":
                integer = max(digits for digits, _ in taking)
                scale = max(places for _, places in taking)
                if integer + scale > 38:
                    continue
                precision = max(DECIMAL_DIGITS, integer + scale)
            examples = tuple(dict.fromkeys(str(value) for value in misfits))[:3]
            return Column(name, kind, len(present) == len(values), distinct, precision, scale, len(misfits),
                          examples)
    return Column(name, "nested", len(present) == len(values), distinct)


def draft(name: str, source: str, columns: dict[str, list[Any]], text_typed: bool, *, now_s: float,
          allowed_s: int, id_field: str | None = None, time_field: str | None = None, key_field: str | None = None,
          module: Path | None = None) -> Draft:
    """The draft of pipeline ``name`` from a file's sampled ``columns``; ``key_field="none"`` asks for no key.

    Raises PlatformError, in one line naming the flag to give, when a column it needs cannot be found."""
    _check_name(name, module)
    if not columns:
        raise PlatformError(f"{source}: no rows to draft a pipeline from")
    rows = len(next(iter(columns.values())))
    unnamed = [column for column in columns if not _FIELD.fullmatch(column)]
    inferred = [_typed_as_declared(infer_column(column, values, text_typed))
                for column, values in columns.items() if column not in unnamed]
    nested = [column.name for column in inferred if column.kind == "nested"]
    kept = tuple(column for column in inferred if column.kind != "nested")
    by_name = {column.name: column for column in kept}
    notes = []
    if unnamed:
        notes.append(f"left out {', '.join(map(repr, unnamed))}: a field's name is letters, digits and single "
                     "underscores, starting with a letter (rename the column to keep it)")
    if nested:
        notes.append(f"left out {', '.join(nested)}: no value of a kind a field holds, such as a nested object, or "
                     "always empty (the stream ignores them)")
    if not kept:
        raise PlatformError(f"{source}: no column can be a field; {notes[0]}")

    chosen_id = _named(id_field, by_name, "--id") or _guess_id(kept, source)
    notes.append(_said("id", chosen_id, id_field, "the id-like column with the most distinct values",
                       "--id names another"))
    chosen_time = _named(time_field, by_name, "--time") or _guess_time(kept, source)
    if by_name[chosen_time].kind != "timestamp":
        raise PlatformError(f"--time {chosen_time}: its values are not ISO-8601 times with an offset "
                            f"(such as 2025-03-01T08:00:05Z), so the stream could not read them")
    notes.append(_said("time", chosen_time, time_field, "the first column of times", "--time names another"))
    chosen_key = None if key_field == "none" else _named(key_field, by_name, "--key") or _guess_key(kept, chosen_id)
    notes.append(_said("key", chosen_key, key_field, "the id-like column with the fewest distinct values",
                       "--key names another, or none") if chosen_key else
                 "key: none; events are sent without a Kafka key (--key names a column)")

    fields = {chosen_id, chosen_time, *([chosen_key] if chosen_key else [])}
    kept = tuple(replace(c, required=True) if c.name in fields else c for c in kept)
    for column in kept:
        if column.misfits:
            shown = ", ".join(repr(example) for example in column.examples)
            notes.append(f"{column.name}: {_label(column)}; {column.misfits:,} of {rows:,} sampled values are not "
                         f"({shown}): the stream dead-letters such events as wrong_type:{column.name}")
    event_types = _declared_values(by_name.get(TYPE_FIELD), columns.get(TYPE_FIELD), str, (name,))
    versions = _declared_values(by_name.get(VERSION_FIELD), columns.get(VERSION_FIELD), int, (1,))
    timed = [seconds for seconds in map(_epoch_seconds, columns[chosen_time]) if seconds is not None]
    late = sum(now_s - seconds > allowed_s for seconds in timed)
    history = is_history(len(timed), late)
    if history:
        notes.append(f"lateness: against the log's high-water mark, since {late:,} of {len(timed):,} sampled events "
                     f"are more than {allowed_s}s old: against append time every one would be late")
    return Draft(name, source, rows, kept, chosen_id, chosen_time, chosen_key, event_types, versions, history,
                 tuple(notes))


def _check_name(name: str, module: Path | None) -> None:
    """A pipeline's name is its module's: a plain identifier that no importable module has already, but for the
    draft's own ``module`` written before."""
    if not _NAME.fullmatch(name) or keyword.iskeyword(name):
        raise PlatformError(f"pipeline name {name!r}: lower-case letters and digits, single underscores between "
                            "them, starting with a letter (it names the module, the topic and the tables)")
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        found = None
    if found is not None and not (module and found.origin and Path(found.origin).resolve() == module.resolve()):
        raise PlatformError(f"pipeline name {name!r}: a module of that name is importable already "
                            f"({found.origin or 'a package'}), and one of the two would hide the other; pick another")


def _typed_as_declared(column: Column) -> Column:
    """The event type and version columns hold what the platform reads as such: text and a whole number."""
    kinds = {TYPE_FIELD: "string", VERSION_FIELD: "long"}
    if column.name not in kinds or column.kind == kinds[column.name]:
        return column
    return Column(column.name, kinds[column.name], column.required, column.distinct)


def _named(given: str | None, by_name: dict[str, Column], flag: str) -> str | None:
    if given is None:
        return None
    if given not in by_name:
        known = ", ".join(by_name) or "none"
        raise PlatformError(f"{flag} {given}: no column of that name can be a field; those that can: {known}")
    return given


def _said(role: str, column: str, given: str | None, why: str, flag: str) -> str:
    return f"{role}: {column}" + ("" if given else f" (guessed: {why}; {flag})")


def _id_like(name: str) -> bool:
    """``id``, ``order_id``, ``orderId``, ``uuid``."""
    lower = name.lower()
    return lower == "id" or lower.endswith(("_id", "uuid")) or name.endswith("Id")


def _guess_id(columns: Sequence[Column], source: str) -> str:
    candidates = [c for c in columns if _id_like(c.name) and c.kind in ("string", "long")]
    if not candidates:
        raise PlatformError(f"{source}: no column looks like an event id (named id or ending in _id); name one with "
                            "--id")
    return max(candidates, key=lambda c: c.distinct).name


def _guess_time(columns: Sequence[Column], source: str) -> str:
    times = [c.name for c in columns if c.kind == "timestamp"]
    if not times:
        raise PlatformError(f"{source}: no column holds ISO-8601 times with an offset (such as "
                            "2025-03-01T08:00:05Z), which the event time needs; add the offset to the file's times "
                            "or name a column with --time")
    return times[0]


def _guess_key(columns: Sequence[Column], id_field: str) -> str | None:
    candidates = [c for c in columns if c.name != id_field and _id_like(c.name) and c.kind in ("string", "long")
                  and c.distinct > 1]
    return min(candidates, key=lambda c: c.distinct).name if candidates else None


def _declared_values(column: Column | None, values: list[Any] | None, kind: type, implied: tuple) -> tuple:
    """The event types (or versions) the file's own column holds, else the one it implies."""
    if column is None or values is None:
        return implied
    try:
        found = sorted({kind(value) for value in values if value is not None})
    except (TypeError, ValueError):
        raise PlatformError(f"column {column.name} holds values that are not {kind.__name__}s; it names what the "
                            "platform reads as the event's type and version, so rename it") from None
    return tuple(found) or implied


def _epoch_seconds(value: Any) -> float | None:
    if isinstance(value, dt.datetime):
        return (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).timestamp()
    if isinstance(value, str) and _TIME.fullmatch(value.strip()):
        try:
            return dt.datetime.fromisoformat(value.strip()).timestamp()
        except ValueError:  # not a real time: the stream dead-letters it
            return None
    return None


def _label(column: Column) -> str:
    return f"decimal({column.precision},{column.scale})" if column.kind == "decimal" else column.kind


def _tuple(values: Sequence[str]) -> str:
    """A tuple of strings as Python source, one per line when they do not fit on one."""
    items = [json.dumps(value) for value in values]
    one_line = "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    return one_line if len(one_line) <= 80 else "(\n" + "".join(f"        {item},\n" for item in items) + "    )"


def _prose(text: str, indent: str = "") -> str:
    """Text for a docstring, wrapped within the line length, without a quote or backslash that could end it."""
    plain = text.replace("\\", "/").replace('"', "'")
    return textwrap.fill(plain, width=116 - len(indent), subsequent_indent=indent)


def _field(column: Column) -> str:
    extra = f", precision={column.precision}, scale={column.scale}" if column.kind == "decimal" else ""
    return f'FieldSpec("{column.name}", "{column.kind}"{extra}{"" if column.required else ", required=False"})'


def pipeline_module(draft: Draft) -> str:
    """The pipeline module, ready to import as ``<name>:PIPELINE``."""
    fields = [_field(column) for column in draft.columns]
    fields += [_field(Column(TYPE_FIELD, "string", True, 1))] if TYPE_FIELD not in draft.by_name else []
    fields += [_field(Column(VERSION_FIELD, "long", True, 1))] if VERSION_FIELD not in draft.by_name else []
    field_lines = "".join(f"        {spec},\n" for spec in fields)
    key = f'"{draft.key_field}"' if draft.key_field else "None"
    versions = "" if draft.versions == (1,) else f"\n    versions={draft.versions!r},"
    group = ", ".join(f'"{column}"' for column in draft.group)
    keys = _tuple(draft.group)
    aggregates = [f'F.count("*").alias("{draft.count}")'] + [
        f'F.{function}("{column}").alias("{alias}")' for function, column, alias in draft.measures]
    merges = [f'"sum({draft.count}) AS {draft.count}"'] + [
        f'"{function}({alias}) AS {alias}"' for function, _, alias in draft.measures]
    per = f"{draft.key_field} and day" if draft.key_field else "day"
    what = "how many events" + ("".join(
        f", the {dict(min='least', max='greatest', sum='summed')[function]} {column}"
        for function, column, _ in draft.measures) if draft.measures else "")
    imports = ["EventSchema", "FieldSpec", "Fold", "GoldTable", "Pipeline"]
    lateness = ""
    if draft.history:
        imports = ["HIGH_WATER_MARK", *imports[:4], "Lateness", "Pipeline"]
        lateness = ("    # The file is a history: measured against append time, its events would all be late.\n"
                    "    lateness=Lateness(against=HIGH_WATER_MARK),\n")
    title = _prose(f"The {draft.name} pipeline, drafted by `kappa init {draft.name} --from {draft.source}` from its "
                   f"first {draft.rows:,} rows.")
    per_doc = _prose(f"Per {per}: {what}.", "    ")
    return f'''"""{title}

Check each field's kind, then grow the gold table (docs/pipelines.md, "Declaring a pipeline").
"""

from pyspark.sql import functions as F
from spark_apps.pipeline import {", ".join(imports)}

SCHEMA = EventSchema(
    fields=(
{field_lines}    ),
    event_types={_tuple(draft.event_types)},{versions}
    id_field="{draft.id_field}",
    time_field="{draft.time_field}",
    key_field={key},
)


def {draft.table}_rows(events, settings):
    """Each event belongs to the UTC day of its {draft.time_field} (the platform's sessions run in UTC)."""
    return events.withColumn("{draft.day}", F.to_date("{draft.time_field}"))


def {draft.table}(rows, settings):
    """{per_doc}"""
    return rows.groupBy({group}).agg(
{"".join(f"        {aggregate},{chr(10)}" for aggregate in aggregates)}    )


PIPELINE = Pipeline(
    name="{draft.name}",
    schema=SCHEMA,
    topic="{draft.name}",
    table_prefix="{draft.name}_",
{lateness}    gold_tables=(
        GoldTable(
            "{draft.table}",
            recompute_keys={keys},
            primary_keys={keys},
            key_rows={draft.table}_rows,
            compute={draft.table},
            # Counts, sums, least and greatest values fold: the stream appends each micro-batch's partial rows.
            fold=Fold(merge=(
{"".join(f"                {merge},{chr(10)}" for merge in merges)}            )),
        ),
    ),
)
'''


def pipeline_test_module(draft: Draft, file_name: str) -> str:
    """A test of the drafted gold table on the file's first rows, with a local Spark of its own."""
    return f'''"""Tests of the {draft.name} pipeline: `python -m pytest test_{draft.name}.py` in this folder."""

import itertools
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from spark_apps.io.event_files import event_files, read_records

from {draft.name} import PIPELINE

FILE = Path(__file__).parent / {json.dumps(file_name)}


@pytest.fixture(scope="module")
def events():
    """The file's first rows as the stream's JSON records, read with the pipeline's field types."""
    spark = (SparkSession.builder.master("local[1]").appName("test-{draft.name}")
             .config("spark.sql.session.timeZone", "UTC").config("spark.ui.enabled", "false").getOrCreate())
    records = [record.value.decode() for record in
               itertools.islice(read_records(event_files(FILE), PIPELINE.schema), 1000)]
    columns = ", ".join(f"`{{spec.name}}` {{spec.spark_type}}" for spec in PIPELINE.schema.fields)
    yield spark.read.schema(columns).json(spark.sparkContext.parallelize(records))
    spark.stop()


def test_{draft.table}_counts_every_event_once_under_one_row_per_key(events):
    table = PIPELINE.gold_by_name["{draft.table}"]
    gold = table.compute(table.key_rows(events, None), None)
    assert gold.agg(F.sum("{draft.count}")).first()[0] == events.count()
    assert gold.groupBy(*table.primary_keys).count().where("count > 1").count() == 0
'''
