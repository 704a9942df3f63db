"""A Delta table's snapshot read from its log without a JVM: the live files of a version with their statistics, and
a small table's rows read from those files by pyarrow.

`kappa status` asks the ledger and the serving state for a few rows, and starting Spark for them took 10-40 s; the
stream's compaction asks how many rows and files each gold table's tail holds, and a query for it opened every file.
Delta's protocol defines a snapshot from the log alone: the newest checkpoint (one file or several parts), then every
commit after it in order, an ``add`` making a file live and a ``remove`` retiring it; each ``add`` carries the file's
partition values and statistics. A table that needs more than that is :class:`Unreadable` here, and the caller asks
Spark: for its rows, a live file with a deletion vector, column mapping or partition columns; for either, a v2
checkpoint or a reader feature not listed below.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
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


@dataclass(frozen=True)
class FileStats:
    """What the log says of one live data file: its partition values, its rows and its columns' largest values."""

    path: str
    partition: dict[str, str | None]
    records: int
    max_values: dict[str, Any]


def live_files(table: Location) -> list[Location]:
    """The data files of the table's newest version, in the order the log added them."""
    adds, meta = _live_adds(table)
    if _column_mapped(meta) or meta.get("partitionColumns"):
        raise Unreadable("column mapping or partition columns")
    for add in adds:
        if add.get("deletionVector"):
            raise Unreadable(f"a deletion vector on {add['path']}")
    return [_data_path(table, add["path"]) for add in adds]


def file_stats(table: Location, version: int) -> list[FileStats]:
    """Every live data file of the table at ``version``, with the statistics its ``add`` action carries: what
    opening every file would tell, read from the log alone (rows a deletion vector hides are not counted)."""
    adds, meta = _live_adds(table, version)
    if _column_mapped(meta):
        raise Unreadable("column mapping")
    found = []
    for add in adds:
        stats = json.loads(add.get("stats") or "null")
        if not isinstance(stats, dict) or "numRecords" not in stats:
            raise Unreadable(f"no statistics for {add['path']}")
        hidden = int((add.get("deletionVector") or {}).get("cardinality") or 0)
        found.append(FileStats(add["path"], dict(add.get("partitionValues") or {}), int(stats["numRecords"]) - hidden,
                               dict(stats.get("maxValues") or {})))
    return found


def _column_mapped(meta: dict) -> bool:
    """Whether the table's files name their columns otherwise than its schema (Delta's column mapping)."""
    return dict(meta.get("configuration") or {}).get("delta.columnMapping.mode", "none") != "none"


def _live_adds(table: Location, version: int | None = None) -> tuple[list[dict], dict]:
    """The ``add`` actions of the table's live files at ``version`` (the newest when None), in the order the log
    added them, and the table's metadata there."""
    log = table / "_delta_log"
    names = [p.name for p in log.iterdir()] if log.is_dir() else []
    versions = sorted(v for v in (int(m.group(1)) for m in map(COMMIT_FILE.match, names) if m)
                      if version is None or v <= version)
    checkpoint, actions = _newest_checkpoint(log, names, version)
    start = checkpoint + 1 if checkpoint is not None else 0
    after = [v for v in versions if v >= start]
    if after != list(range(start, start + len(after))) or (checkpoint is None and not after) or \
            (version is not None and (after[-1] if after else checkpoint) != version):
        raise Unreadable(f"{log}: the commits after version {start - 1} are not all there")
    live: dict[str, dict] = {}
    meta: dict = {}
    for action in actions:
        meta = _apply(action, live, meta)
    for number in after:
        with (log / f"{number:020d}.json").open(encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    meta = _apply(json.loads(line), live, meta)
    return list(live.values()), meta


def _newest_checkpoint(log: Location, names: list[str], version: int | None) -> tuple[int | None, list[dict]]:
    """The newest checkpoint (at or before ``version``) whose parts are all there, and its actions; (None, [])
    when there is none."""
    import pyarrow.parquet as pq

    parts: dict[int, dict[int, str]] = {}
    counts: dict[int, int] = {}
    for match in map(CHECKPOINT_FILE.match, names):
        if match and (version is None or int(match.group(1)) <= version):
            number = int(match.group(1))
            parts.setdefault(number, {})[int(match.group(2) or 1)] = match.group(0)
            counts[number] = int(match.group(3) or 1)
    whole = [v for v in parts if len(parts[v]) == counts[v]]
    if not whole:
        return None, []
    newest = max(whole)
    actions = []
    for name in (parts[newest][i] for i in sorted(parts[newest])):
        table = pq.read_table(_readable(log / name), columns=["add", "metaData", "protocol"])
        actions += [{key: value for key, value in row.items() if value is not None} for row in table.to_pylist()]
    return newest, actions


def _apply(action: dict, live: dict[str, dict], meta: dict) -> dict:
    """One log action on the live files; returns the table's metadata after it. Refuses a reader feature this
    module does not know."""
    if "protocol" in action:
        features = set(action["protocol"].get("readerFeatures") or ())
        if action["protocol"].get("minReaderVersion", 1) == 2 or features - READABLE_FEATURES:
            raise Unreadable(f"reader protocol {action['protocol']}")
    elif "metaData" in action:
        return action["metaData"]
    elif "add" in action:
        live[action["add"]["path"]] = action["add"]
    elif "remove" in action:
        live.pop(action["remove"]["path"], None)
    return meta


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
