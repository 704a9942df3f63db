"""What a Delta table's commits after a version wrote: the rows of the files they added.

An incremental audit needs the keys the stream changed since its last verified version without scanning whole
tables for differences. Every row a commit inserts or rewrites (a MERGE's update, an OPTIMIZE's compaction) lands in
a file that commit adds, so the rows of the files added in ``(after, through]`` cover every changed key; a row only
deleted leaves a count the audit compares on the whole table.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

from spark_apps.core.errors import PlatformError


class HistoryGone(PlatformError):
    """A commit file the question needs was cleaned up (log retention): only a full comparison can answer."""


def files_added(table: Path, after: int, through: int) -> set[str]:
    """Paths (relative to the table, or absolute) of the data files the commits ``after + 1 .. through`` added that
    version ``through`` still holds.

    A MERGE into a table with deletion vectors removes and re-adds a file it only marked rows of, in the same
    commit: the file is the same, its rows fewer, so it holds no new row and is left out. A file added and then
    removed within the range (compacted, rewritten, or every row deleted) is left out too: a row of it that lives on
    lives in a file added after it."""
    live: set[str] = set()
    for version in range(after + 1, through + 1):
        commit = table / "_delta_log" / f"{version:020d}.json"
        if not commit.exists():
            raise HistoryGone(f"{commit} is gone (log retention), so the changes since version {after} are unknown")
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        removed = {unquote(a["remove"]["path"]) for a in actions if "remove" in a}
        added = {unquote(a["add"]["path"]): bool(a["add"].get("deletionVector")) for a in actions if "add" in a}
        marked = {path for path, has_vector in added.items() if has_vector and path in removed}
        live = (live - (removed - marked)) | (set(added) - marked)
    return live


def rows_added(spark, table: Path, after: int, through: int):
    """The rows of the data files :func:`files_added` names, as written, read from those files alone: a filter on the
    table's ``_metadata.file_name`` opens every file of the table, and a stream's micro-batch asks this every time.

    A row a later commit of the range marked deleted in one of those files (a deletion vector) is still among them,
    which for the keys a comparison is scoped by is a superset. Tables here have no partition columns and no column
    mapping, so a file's columns are the table's."""
    added = sorted(files_added(table, after, through))
    schema = spark.read.format("delta").option("versionAsOf", through).load(str(table)).schema
    if not added:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*[path if "://" in path else str(table / path) for path in added])
