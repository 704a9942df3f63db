"""A small Delta table read without a JVM: the live files of its newest version, found in its log, read by pyarrow.

`kappa status` asks the ledger and the serving state for a few rows, and starting Spark for them took 10-40 s.
Delta's protocol defines the newest snapshot from the log alone: the newest checkpoint (one file or several parts),
then every commit after it in order, an ``add`` making a file live and a ``remove`` retiring it. A table that needs
more than that to read is :class:`Unreadable` here, and the caller reads it with Spark: a live file with a
deletion vector, column mapping, partition columns, a v2 checkpoint, a reader feature not listed below.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from spark_apps.core.object_path import Location
from spark_apps.core.settings import Settings
from spark_apps.io import delta_log
from spark_apps.io.catalog import table_path
from spark_apps.io.delta_log import COMMIT_FILE

CHECKPOINT_FILE = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")
# Reader features that change nothing for a reader of plain Parquet files with no deletion vector.
READABLE_FEATURES = {"deletionVectors", "timestampNtz", "vacuumProtocolCheck"}


class Unreadable(Exception):
    """The table needs a full Delta reader (Spark): the reason says what."""


def live_files(table: Location) -> list[Location]:
    """The data files of the table's newest version, in the order the log added them."""
    log = table / "_delta_log"
    names = [p.name for p in log.iterdir()] if log.is_dir() else []
    versions = sorted(int(m.group(1)) for m in map(COMMIT_FILE.match, names) if m)
    checkpoint, files = _newest_checkpoint(log, names)
    live: dict[str, dict] = {}
    for action in files:
        _apply(action, live)
    start = checkpoint + 1 if checkpoint is not None else 0
    after = [v for v in versions if v >= start]
    if after != list(range(start, start + len(after))) or (checkpoint is None and not after):
        raise Unreadable(f"{log}: the commits after version {start - 1} are not all there")
    for version in after:
        with (log / f"{version:020d}.json").open(encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    _apply(json.loads(line), live)
    return [_data_path(table, add["path"]) for add in live.values()]


def _newest_checkpoint(log: Location, names: list[str]) -> tuple[int | None, list[dict]]:
    """The newest checkpoint whose parts are all there, and its actions; (None, []) when there is none."""
    import pyarrow.parquet as pq

    parts: dict[int, dict[int, str]] = {}
    counts: dict[int, int] = {}
    for match in map(CHECKPOINT_FILE.match, names):
        if match:
            version = int(match.group(1))
            parts.setdefault(version, {})[int(match.group(2) or 1)] = match.group(0)
            counts[version] = int(match.group(3) or 1)
    whole = [v for v in parts if len(parts[v]) == counts[v]]
    if not whole:
        return None, []
    version = max(whole)
    actions = []
    for name in (parts[version][i] for i in sorted(parts[version])):
        table = pq.read_table(_readable(log / name), columns=["add", "metaData", "protocol"])
        actions += [{key: value for key, value in row.items() if value is not None} for row in table.to_pylist()]
    return version, actions


def _apply(action: dict, live: dict[str, dict]) -> None:
    """One log action on the live files; refuses what a plain Parquet reader would get wrong."""
    if "protocol" in action:
        features = set(action["protocol"].get("readerFeatures") or ())
        if action["protocol"].get("minReaderVersion", 1) == 2 or features - READABLE_FEATURES:
            raise Unreadable(f"reader protocol {action['protocol']}")
    elif "metaData" in action:
        meta = action["metaData"]
        configuration = dict(meta.get("configuration") or {})
        if configuration.get("delta.columnMapping.mode", "none") != "none" or meta.get("partitionColumns"):
            raise Unreadable("column mapping or partition columns")
    elif "add" in action:
        add = action["add"]
        if add.get("deletionVector"):
            raise Unreadable(f"a deletion vector on {add['path']}")
        live[add["path"]] = add
    elif "remove" in action:
        live.pop(action["remove"]["path"], None)


def _data_path(table: Location, path: str) -> Location:
    """A file the log names, relative to the table (percent-encoded) or as a ``file:`` URI."""
    parsed = urlparse(path)
    if parsed.scheme and parsed.scheme != "file":
        raise Unreadable(f"a data file on {parsed.scheme}: {path}")
    return Path(unquote(parsed.path)) if parsed.scheme else table / unquote(path)


def read_table(table: Location, columns: list[str]):
    """The table's rows as a pyarrow Table of ``columns``: a column a file lacks (added to the table later) is
    null in its rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pieces = []
    for path in live_files(table):
        data = pq.ParquetFile(_readable(path))
        pieces.append(data.read(columns=[c for c in columns if c in data.schema_arrow.names]))
    if not pieces:
        return pa.table({c: pa.array([], pa.null()) for c in columns})
    joined = pa.concat_tables(pieces, promote_options="default")
    for column in columns:
        if column not in joined.column_names:
            joined = joined.append_column(column, pa.nulls(len(joined)))
    return joined.select(columns)


def _readable(path: Location) -> Any:
    """What pyarrow reads a file from: a local path, or the object's bytes (the tables read here are small)."""
    import pyarrow as pa

    return path if isinstance(path, Path) else pa.BufferReader(path.read_bytes())


def rows(settings: Settings, table: str, columns: list[str], spark: Callable[[], Any]) -> list[dict]:
    """The rows of the platform's table ``schema.name`` (none before its first commit), read from its files;
    Spark (``spark()`` gives the session) reads a table this module cannot. Times come as Spark gives them to
    Python: naive, on the machine's clock."""
    import pyarrow

    path = table_path(settings, table)
    if not delta_log.has_commits(path):
        return []
    try:
        found = _microseconds(read_table(path, columns)).to_pylist()
    except (Unreadable, OSError, ValueError, KeyError, pyarrow.ArrowException):
        return [row.asDict() for row in spark().read.format("delta").load(str(path)).select(*columns).collect()]
    return [{column: _local(value) for column, value in row.items()} for row in found]


def _microseconds(table):
    """Spark's INT96 times read as nanoseconds, which Python's datetime cannot hold: as microseconds, Spark's own
    precision."""
    import pyarrow as pa

    return table.cast(pa.schema([pa.field(f.name, pa.timestamp("us", f.type.tz)) if pa.types.is_timestamp(f.type)
                                 else f for f in table.schema]))


def _local(value: Any) -> Any:
    """A time as Spark's collect gives it: Parquet holds instants (INT96 read as naive UTC, or UTC-adjusted)."""
    if not isinstance(value, dt.datetime):
        return value
    return (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).astimezone().replace(tzinfo=None)
