"""Files of events: what `kappa produce --file` sends. JSON lines are sent as written; CSV rows become JSON typed
by the schema's field kinds."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from spark_apps.core.errors import PlatformError
from spark_apps.pipeline.event_schema import EventSchema

# File formats by suffix: JSON lines (one event object a line) and CSV (a header row naming the fields).
JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")
CSV_SUFFIXES = (".csv",)


@dataclass(frozen=True)
class FileRecord:
    """One event of a file: where it was, its Kafka key and the JSON value sent."""

    line: int
    key: bytes | None
    value: bytes


def read_events(path: Path, schema: EventSchema) -> list[FileRecord]:
    """The events of ``path`` as records: ``.jsonl`` (one JSON object a line, sent as written) or ``.csv`` (a
    header naming the fields; cells become the JSON type of their field's kind, empty cells are left
    out). A file that cannot be read this way is a :class:`PlatformError` naming the file and the line."""
    suffix = path.suffix.lower()
    if suffix not in JSON_LINES_SUFFIXES + CSV_SUFFIXES:
        raise PlatformError(f"{path}: cannot tell the format; name a file of events .jsonl (JSON lines) or .csv "
                            "(with a header row)")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise PlatformError(f"{path}: no such file of events") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PlatformError(f"{path}: cannot read it as UTF-8 text ({exc})") from None
    records = json_lines(text, schema, path.name) if suffix in JSON_LINES_SUFFIXES else csv_rows(text, schema,
                                                                                                    path.name)
    if not records:
        raise PlatformError(f"{path}: holds no events")
    return records


def json_lines(text: str, schema: EventSchema, name: str = "events") -> list[FileRecord]:
    """One event per non-blank line, each a JSON object; the line's bytes are the record's value."""
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PlatformError(f"{name} line {number}: not JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(event, dict):
            raise PlatformError(f"{name} line {number}: not a JSON object but {type(event).__name__}")
        records.append(FileRecord(number, schema.key_of(event), line.encode()))
    return records


def _csv_rows(reader, name: str) -> Iterator[list[str]]:
    """The reader's rows; a row the csv module cannot read (a field over its size limit, say) is one line."""
    try:
        yield from reader
    except csv.Error as exc:
        raise PlatformError(f"{name} line {reader.line_num}: not CSV ({exc})") from None


def csv_rows(text: str, schema: EventSchema, name: str = "events") -> list[FileRecord]:
    """One event per row under a header row; typed by the schema's field kinds, sent as compact JSON. A file
    without an event type or version column gets the pipeline's only one (``implied_fields``)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    rows = _csv_rows(reader, name)
    header = next(rows, None)
    if not header or not any(column.strip() for column in header):
        raise PlatformError(f"{name}: no header row; a CSV file of events starts with the field names")
    header = [column.strip() for column in header]
    _check_header(header, name)
    implied = implied_fields(schema, header)
    records = []
    for row in rows:
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise PlatformError(f"{name} line {reader.line_num}: {len(row)} values under a header of "
                                f"{len(header)} fields")
        event = {**implied, **{column: _typed(schema, column, cell, name, reader.line_num)
                               for column, cell in zip(header, row, strict=True) if cell != ""}}
        value = "{" + ",".join(f"{json.dumps(column)}:{_json_literal(v)}" for column, v in event.items()) + "}"
        records.append(FileRecord(reader.line_num, schema.key_of(event), value.encode()))
    return records


def implied_fields(schema: EventSchema, header: Sequence[str]) -> dict[str, Any]:
    """The event type and schema version a CSV file may leave out, because the pipeline allows only one.

    A file someone already has rarely carries either column; with one event type and one version there is
    nothing to choose, so every row gets them. With several, the rows must say which, or the parser sends them
    to the dead letters as it would any producer's (``missing_field:<column>``)."""
    return {column: allowed[0]
            for column, allowed in ((schema.type_field, schema.event_types), (schema.version_field, schema.versions))
            if column not in header and len(allowed) == 1}


def _check_header(header: Sequence[str], name: str) -> None:
    blank = [index + 1 for index, column in enumerate(header) if not column]
    if blank:
        raise PlatformError(f"{name}: header column {blank[0]} has no name")
    repeated = sorted({column for column in header if header.count(column) > 1})
    if repeated:
        raise PlatformError(f"{name}: header names {', '.join(repeated)} more than once")


class _Number(str):
    """A number's text as the CSV has it, written into the JSON as is: a decimal keeps every digit."""


def _json_literal(value: Any) -> str:
    return str(value) if isinstance(value, _Number) else json.dumps(value)


def _typed(schema: EventSchema, column: str, cell: str, name: str, line: int) -> Any:
    """A CSV cell as the schema's kind wants it in JSON: a number for long, double and decimal fields (and
    epoch-millisecond timestamps), true/false for booleans, else the string itself. The parser then decides
    whether the value is valid, as it does for any producer."""
    spec = schema.by_name.get(column)
    kind = "long" if spec is not None and spec.epoch_millis else spec.kind if spec is not None else "string"
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
    if kind in ("long", "double", "decimal", "boolean"):
        wanted = {"long": "a whole number", "boolean": "true or false"}.get(kind, "a finite number")
        raise PlatformError(f"{name} line {line}: {column} must be {wanted}, got {cell!r}") from None
    return cell
