"""Files of events: what `kappa produce --file` sends, read the way the stream will judge it.

Formats, by suffix: JSON lines (``.jsonl``, ``.ndjson``) and CSV with a header row (``.csv``), either one
gzip-compressed (``.gz`` after it), and Parquet (``.parquet``). A folder is read as its files of these formats in
name order (names starting with ``.`` or ``_``, such as Spark's ``_SUCCESS``, are not events). Files are read a
chunk at a time, never read whole.

Permissive by default, as Spark's own readers are: a record that is not a valid event is still sent, and the
stream's parser dead-letters it with a reason that names what is wrong, so nothing of the file is lost:

- a CSV cell or Parquet value that cannot take its field's kind is sent as its text (``wrong_type:<field>``);
- a line that is not JSON, or a CSV row with more or fewer values than the header, is sent as its text
  (``malformed_json``), and a JSON line that is not an object as written (``not_a_json_object``).

Strict, the first such record refuses the file, naming the file and the line. Either way a file that cannot be
read at all (no header row, a header naming a column twice, text the csv module cannot split, not Parquet) is an
error. CSV and Parquet rows become compact JSON typed by the schema's field kinds; every record, JSON lines too,
gets the event type and schema version it leaves out when the pipeline allows only one (``implied_fields``).
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import gzip
import io
import itertools
import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, TextIO

from spark_apps.core.errors import PlatformError
from spark_apps.pipeline.event_schema import EventSchema
from spark_apps.pipeline.lateness import LatenessRule

FORMATS = {"jsonl": (".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz"), "csv": (".csv", ".csv.gz"),
           "parquet": (".parquet",)}
KNOWN_FORMATS = ".jsonl (JSON lines) or .csv (with a header row), either with .gz, or .parquet"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# Rows of a Parquet file read at a time.
PARQUET_BATCH_ROWS = 4096
# How many of a file's first records the producer looks at before sending, to tell a history from live events.
HISTORY_SAMPLE = 10_000


@dataclass(frozen=True)
class FileRecord:
    """One event of a file: where it was (line, or row of a Parquet file), its Kafka key and the value sent."""

    line: int
    key: bytes | None
    value: bytes


def format_of(path: Path) -> str | None:
    """``jsonl``, ``csv`` or ``parquet`` by the file's name, else None."""
    name = path.name.lower()
    return next((kind for kind, suffixes in FORMATS.items() if name.endswith(suffixes)), None)


def event_files(path: Path) -> list[Path]:
    """The files ``path`` names: itself, or a folder's files of events in name order."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir()
                       if p.is_file() and format_of(p) and not p.name.startswith((".", "_")))
        if not files:
            raise PlatformError(f"{path}: a folder without files of events; name them {KNOWN_FORMATS}")
        return files
    if not path.exists():
        raise PlatformError(f"{path}: no such file of events")
    if format_of(path) is None:
        raise PlatformError(f"{path}: cannot tell the format; name a file of events {KNOWN_FORMATS}")
    return [path]


def read_records(paths: Sequence[Path], schema: EventSchema, strict: bool = False) -> Iterator[FileRecord]:
    """Every event of the files in order, read lazily (see the module's docstring for what ``strict`` refuses)."""
    for path in paths:
        kind = format_of(path)
        if kind == "parquet":
            yield from parquet_rows(path, schema, strict)
        else:
            with _text(path) as handle:
                read = json_lines if kind == "jsonl" else csv_rows
                yield from read(handle, schema, path.name, strict)


@contextlib.contextmanager
def _text(path: Path) -> Iterator[TextIO]:
    """The file as text, gunzipped when it ends in ``.gz``. Bytes that are not UTF-8 are kept as they are (they
    reach the log unchanged), and the first line's byte-order mark is dropped."""
    opener: Callable[..., Any] = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8-sig", errors="surrogateescape", newline="") as handle:
            yield handle
    except (OSError, EOFError) as exc:
        raise PlatformError(f"{path}: cannot read it ({exc})") from None


def _raw(text: str) -> bytes:
    """The bytes a line of text was read from."""
    return text.encode("utf-8", "surrogateescape")


def json_lines(lines: Iterable[str], schema: EventSchema, name: str = "events",
               strict: bool = False) -> Iterator[FileRecord]:
    """One event per non-blank line, sent as written (with the implied fields it lacks put first)."""
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            event = json.loads(line, parse_constant=_not_json)
        except (json.JSONDecodeError, ValueError) as exc:
            detail = f"{exc.msg} at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else str(exc)
            _refuse_if(strict, f"{name} line {number}: not JSON ({detail})")
            yield FileRecord(number, None, _raw(line))
            continue
        if not isinstance(event, dict):
            _refuse_if(strict, f"{name} line {number}: not a JSON object but {type(event).__name__}")
            yield FileRecord(number, None, _raw(line))
            continue
        implied = implied_fields(schema, list(event))
        value = _with_fields(line, implied) if implied else line
        yield FileRecord(number, schema.key_of({**implied, **event}), _raw(value))


def _not_json(constant: str) -> Any:
    """Python's json reads NaN and Infinity; JSON, and so the stream's parser, does not."""
    raise ValueError(f"{constant} is not a JSON value")


def _with_fields(line: str, fields: dict[str, Any]) -> str:
    """A JSON object's text with ``fields`` put first, everything it had kept byte for byte."""
    rest = line[1:].lstrip()
    added = ",".join(f"{json.dumps(column)}:{json.dumps(value)}" for column, value in fields.items())
    return "{" + added + ("" if rest.startswith("}") else ",") + line[1:]


def _refuse_if(strict: bool, problem: str) -> None:
    if strict:
        raise PlatformError(problem)


def _csv_reader_rows(reader, name: str) -> Iterator[list[str]]:
    """The reader's rows; a row the csv module cannot read (a field over its size limit, say) is one line."""
    try:
        yield from reader
    except csv.Error as exc:
        raise PlatformError(f"{name} line {reader.line_num}: not CSV ({exc})") from None


def _csv_header(reader, name: str) -> tuple[list[str], Iterator[list[str]]]:
    """A CSV file's header, its names stripped and checked, and the rows under it."""
    rows = _csv_reader_rows(reader, name)
    header = next(rows, None)
    if not header or not any(column.strip() for column in header):
        raise PlatformError(f"{name}: no header row; a CSV file of events starts with the field names")
    header = [column.strip() for column in header]
    _check_header(header, name)
    return header, rows


def csv_rows(lines: Iterable[str], schema: EventSchema, name: str = "events",
             strict: bool = False) -> Iterator[FileRecord]:
    """One event per row under a header row, typed by the schema's field kinds and sent as compact JSON; empty
    cells are left out."""
    reader = csv.reader(lines)
    header, rows = _csv_header(reader, name)
    implied = implied_fields(schema, header)
    for row in rows:
        if not any(cell.strip() for cell in row):
            continue
        where = f"{name} line {reader.line_num}"
        if len(row) != len(header):
            _refuse_if(strict, f"{where}: {len(row)} values under a header of {len(header)} fields")
            yield FileRecord(reader.line_num, None, _raw(_csv_text(row)))
            continue
        event = {**implied, **{column: _typed(schema, column, cell, where, strict)
                               for column, cell in zip(header, row, strict=True) if cell != ""}}
        yield FileRecord(reader.line_num, schema.key_of(event), json_object(event))


def _csv_text(row: list[str]) -> str:
    """A row as one line of CSV again: what a row of the wrong width is sent as."""
    text = io.StringIO()
    csv.writer(text, lineterminator="").writerow(row)
    return text.getvalue()


def _parquet_table_rows(path: Path) -> Iterator[dict[str, Any]]:
    """A Parquet file's rows as pyarrow gives them (every column, None for a null), a batch at a time."""
    import pyarrow
    import pyarrow.parquet

    try:
        for batch in pyarrow.parquet.ParquetFile(path).iter_batches(batch_size=PARQUET_BATCH_ROWS):
            yield from batch.to_pylist()
    except (OSError, pyarrow.ArrowException) as exc:
        raise PlatformError(f"{path}: cannot read it as Parquet ({exc})") from None


def parquet_rows(path: Path, schema: EventSchema, strict: bool = False) -> Iterator[FileRecord]:
    """One event per row, typed by the schema's field kinds and sent as compact JSON; nulls are left out."""
    implied = None
    for number, row in enumerate(_parquet_table_rows(path), start=1):
        if implied is None:
            implied = implied_fields(schema, list(row))
        where = f"{path.name} row {number}"
        event = {**implied, **{column: _parquet_value(schema, column, value, where, strict)
                               for column, value in row.items() if value is not None}}
        yield FileRecord(number, schema.key_of(event), json_object(event))


def late_on_arrival(records: Iterable[FileRecord], schema: EventSchema, rule: LatenessRule,
                    now_s: float) -> tuple[int, int]:
    """Of ``records``, how many carry an event time with its offset (or in epoch milliseconds), and how many of
    those the append-time rule would flag late if the broker appended them now."""
    spec = schema.by_name[schema.time_field]
    timed = late = 0
    for record in records:
        try:
            value = json.loads(record.value).get(schema.time_field)
            if spec.epoch_millis:
                seconds = value / 1000 if isinstance(value, int) and not isinstance(value, bool) else None
            else:
                moment = dt.datetime.fromisoformat(value) if isinstance(value, str) else None
                seconds = moment.timestamp() if moment is not None and moment.tzinfo is not None else None
        except (ValueError, AttributeError):
            continue
        if seconds is not None:
            timed += 1
            late += now_s - seconds > rule.allowed_s
    return timed, late


def implied_fields(schema: EventSchema, columns: Sequence[str]) -> dict[str, Any]:
    """The event type and schema version a file may leave out, because the pipeline allows only one.

    A file someone already has rarely carries either column; with one event type and one version there is
    nothing to choose, so every record gets them. With several, the records must say which, or the parser sends
    them to the dead letters as it would any producer's (``missing_field:<column>``)."""
    return {column: allowed[0]
            for column, allowed in ((schema.type_field, schema.event_types), (schema.version_field, schema.versions))
            if column not in columns and len(allowed) == 1}


def _check_header(header: Sequence[str], name: str) -> None:
    blank = [index + 1 for index, column in enumerate(header) if not column]
    if blank:
        raise PlatformError(f"{name}: header column {blank[0]} has no name")
    repeated = sorted({column for column in header if header.count(column) > 1})
    if repeated:
        raise PlatformError(f"{name}: header names {', '.join(repeated)} more than once")


class _Number(str):
    """A number's text as the file has it, written into the JSON as is: a decimal keeps every digit."""


def json_object(event: dict[str, Any]) -> bytes:
    """Compact JSON of a typed event, numbers written as their text."""
    return ("{" + ",".join(f"{json.dumps(column)}:{_json_literal(value)}" for column, value in event.items())
            + "}").encode()


def _json_literal(value: Any) -> str:
    return str(value) if isinstance(value, _Number) else json.dumps(value, default=str)


def _kind(schema: EventSchema, column: str) -> str:
    """The JSON kind a column's value takes: epoch-millisecond timestamps are whole numbers; a column the schema
    does not name is text."""
    spec = schema.by_name.get(column)
    return "string" if spec is None else "long" if spec.epoch_millis else spec.kind


_WANTED = {"long": "a whole number", "boolean": "true or false", "double": "a finite number",
           "decimal": "a finite number"}


def _typed(schema: EventSchema, column: str, cell: str, where: str, strict: bool) -> Any:
    """A CSV cell as the schema's kind wants it in JSON: a number for long, double and decimal fields (and
    epoch-millisecond timestamps), true/false for booleans, else the string itself. A cell that cannot be its
    kind is sent as its text, for the parser to dead-letter (strict: refused)."""
    kind = _kind(schema, column)
    text = cell.strip()
    if kind == "boolean" and text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        if kind == "long":
            return int(text)
        if kind in ("double", "decimal") and math.isfinite(float(text)):
            return _Number(str(Decimal(text)) if kind == "decimal" else repr(float(text)))
    except ValueError:
        pass
    if kind in _WANTED:
        _refuse_if(strict, f"{where}: {column} must be {_WANTED[kind]}, got {cell!r}")
    return cell


def _parquet_value(schema: EventSchema, column: str, value: Any, where: str, strict: bool) -> Any:
    """A Parquet value as the schema's kind wants it in JSON. Times are written in ISO 8601 with their offset (a
    timestamp without a zone is taken as UTC), or as epoch milliseconds for such a field; a number becomes text
    for a text field, and text is typed as a CSV cell is; a value that cannot be its kind is sent as its text
    (strict: refused). A column the schema does not name is sent as it is."""
    spec = schema.by_name.get(column)
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        if spec is not None and spec.epoch_millis:
            return (moment - _EPOCH) // dt.timedelta(milliseconds=1)
        value = moment.isoformat()
    elif isinstance(value, dt.date):
        value = value.isoformat()
    elif isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    number = isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)
    if spec is None:
        return _Number(str(value)) if number and math.isfinite(value) else _plain(value)
    kind = _kind(schema, column)
    if isinstance(value, str) and kind in _WANTED:
        return _typed(schema, column, value, where, strict)  # a text column, read as a CSV cell is
    if kind == "long" and number and isinstance(value, int):
        return value
    if kind in ("double", "decimal") and number and math.isfinite(value):
        return _Number(str(value))
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind not in _WANTED and isinstance(value, str):
        return value
    if kind == "string" and number:
        return str(value)
    _refuse_if(strict, f"{where}: {column} must be {_WANTED.get(kind, 'text')}, got {value!r}")
    return _plain(value)


def _plain(value: Any) -> Any:
    """A value JSON can hold as it is: text, a boolean, a list or a map; anything else as its text."""
    return value if isinstance(value, (str, bool, list, dict)) else str(value)


@dataclass(frozen=True)
class Sample:
    """A file's first rows as columns, for drafting a pipeline: each column's values in row order (None where a
    row leaves it out). ``cells_are_text`` says that a value's text is all there is (CSV), so a cell such as
    ``12`` may be a number; in JSON lines and Parquet a value's own type says."""

    rows: int
    columns: dict[str, list[Any]]
    cells_are_text: bool
    unreadable: int = 0


def sample_columns(paths: Sequence[Path], limit: int = HISTORY_SAMPLE) -> Sample:
    """The first ``limit`` rows of the files (see :func:`event_files`), column by column. A JSON line that is not
    an object, or a CSV row of the wrong width, is counted as unreadable and left out."""
    first = list(itertools.islice(itertools.chain.from_iterable(_raw_rows(path) for path in paths), limit))
    rows = [row for row in first if row is not None]
    unreadable = len(first) - len(rows)
    cells_are_text = all(format_of(path) != "jsonl" for path in paths)
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row))
    return Sample(len(rows), {name: [row.get(name) for row in rows] for name in names}, cells_are_text, unreadable)


def _raw_rows(path: Path) -> Iterator[dict[str, Any] | None]:
    """A file's rows as they are written, untyped: CSV cells as text (an empty cell left out), JSON numbers that
    are not whole as Decimal, Parquet values as pyarrow gives them; None for a row that is not one."""
    kind = format_of(path)
    if kind == "parquet":
        yield from ({k: v for k, v in row.items() if v is not None} for row in _parquet_table_rows(path))
        return
    with _text(path) as handle:
        if kind == "jsonl":
            for line in handle:
                if line.strip():
                    try:
                        event = json.loads(line, parse_float=Decimal, parse_constant=_not_json)
                    except ValueError:
                        event = None
                    yield event if isinstance(event, dict) else None
            return
        header, rows = _csv_header(csv.reader(handle), path.name)
        for row in rows:
            if any(cell.strip() for cell in row):
                yield ({column: cell for column, cell in zip(header, row, strict=True) if cell.strip()}
                       if len(row) == len(header) else None)
