"""What a Delta table's commits after a version wrote: the rows of the files they added.

An incremental audit needs the keys the stream changed since its last verified version without scanning whole
tables for differences. Every row a commit inserts or rewrites (a MERGE's update, an OPTIMIZE's compaction) lands in
a file that commit adds, so the rows of the files added in ``(after, through]`` cover every changed key; a row only
deleted leaves a count the audit compares on the whole table.
"""

from __future__ import annotations

import json
from urllib.parse import unquote

from spark_apps.core.errors import PlatformError
from spark_apps.core.object_path import Location


class HistoryGone(PlatformError):
    """A commit file the question needs was cleaned up (log retention): only a full comparison can answer."""


def files_added(table: Location, after: int, through: int) -> set[str]:
    """Paths (relative to the table, or absolute) of data files holding every row the commits ``after + 1 ..
    through`` wrote that version ``through`` still holds.

    A MERGE into a table with deletion vectors removes and re-adds a file it only marked rows of, in the same
    commit: the file is the same, its rows fewer, so it holds no new row and is left out. A file added and then
    removed within the range by a commit that changes data (rewritten, or every row deleted) is left out too: a row
    of it that lives on lives in a file added after it.

    A commit that changes no data (``dataChange`` false: an OPTIMIZE, a compaction of the stream's store) only
    rearranges rows into other files. A file it removed still names the rows the range wrote while it is on disk
    (within the vacuum retention), and reading it keeps the answer to those rows; once vacuumed, the files the
    rearrangement added stand in for it, a superset (they hold rows from outside the range too)."""
    live: set[str] = set()
    successors: dict[str, set[str]] = {}
    dropped: set[str] = set()
    for version in range(after + 1, through + 1):
        commit = table / "_delta_log" / f"{version:020d}.json"
        if not commit.exists():
            raise HistoryGone(f"{commit} is gone (log retention), so the changes since version {after} are unknown")
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        removed = {unquote(a["remove"]["path"]) for a in actions if "remove" in a}
        added = {unquote(a["add"]["path"]): bool(a["add"].get("deletionVector")) for a in actions if "add" in a}
        changes = [a.get("add") or a.get("remove") for a in actions if "add" in a or "remove" in a]
        if changes and not any(f.get("dataChange", True) for f in changes):
            for path in removed:
                successors[path] = set(added)
            continue
        marked = {path for path, has_vector in added.items() if has_vector and path in removed}
        dropped |= removed - marked
        live = (live - (removed - marked)) | (set(added) - marked)
    return {found for path in live for found in _on_disk(table, path, successors, dropped)}


def _on_disk(table: Location, path: str, successors: dict[str, set[str]], dropped: set[str]) -> set[str]:
    """``path`` when it is still on disk, else the files a rearrangement moved its rows to (a file a later commit
    rewrote holds no row of it that lives on: those are in files of the range)."""
    if "://" in path or (table / path).exists():
        return {path}
    if path not in successors:
        raise HistoryGone(f"{path}, a data file the commits since the audited version wrote, is vacuumed")
    return {found for moved in successors[path] - dropped for found in _on_disk(table, moved, successors, dropped)}


def rows_added(spark, table: Location, after: int, through: int, partition: tuple[str, str] | None = None,
               other_partitions: tuple[str, ...] = ()):
    """The rows of the data files :func:`files_added` names, as written, read from those files alone: a filter on the
    table's ``_metadata.file_name`` opens every file of the table, and an incremental audit asks this of every
    table it scopes.

    A row a later commit of the range marked deleted in one of those files (a deletion vector) is still among them,
    which for the keys a comparison is scoped by is a superset. ``partition`` (column, value) keeps the files of one
    partition of a table partitioned by that one column (the stream's store, by kind), whose rows then lack it;
    tables here have no column mapping, so a file's other columns are the table's (``other_partitions``, further
    partition columns, left out too). A file a compaction removed since is read all the same, from disk."""
    added = sorted(files_added(table, after, through))
    schema = spark.read.format("delta").option("versionAsOf", through).load(str(table)).schema
    if partition is not None:
        column, value = partition
        prefix = f"{column}={value}/"
        added = [path for path in added if path.startswith(prefix) or f"/{prefix}" in path]
        from pyspark.sql.types import StructType

        schema = StructType([f for f in schema.fields if f.name not in (column, *other_partitions)])
    files = [path if "://" in path else str(table / path) for path in added]
    if not added:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*files)
