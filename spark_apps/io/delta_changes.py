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
    """Names of the data files the commits ``after + 1 .. through`` added with rows in them.

    A MERGE into a table with deletion vectors removes and re-adds a file it only marked rows of, in the same
    commit: the file is the same, its rows fewer, so it holds no new row and is left out."""
    names: set[str] = set()
    for version in range(after + 1, through + 1):
        commit = table / "_delta_log" / f"{version:020d}.json"
        if not commit.exists():
            raise HistoryGone(f"{commit} is gone (log retention), so the changes since version {after} are unknown")
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        removed = {a["remove"]["path"] for a in actions if "remove" in a}
        names.update(unquote(a["add"]["path"]).rsplit("/", 1)[-1] for a in actions
                     if "add" in a and not (a["add"].get("deletionVector") and a["add"]["path"] in removed))
    return names


def rows_added(spark, table: Path, after: int, through: int):
    """The rows, as of version ``through``, that live in files added after version ``after``."""
    from pyspark.sql import functions as F

    added = sorted(files_added(table, after, through))
    rows = spark.read.format("delta").option("versionAsOf", through).load(str(table))
    if not added:
        return rows.where(F.lit(False))
    return rows.where(F.col("_metadata.file_name").isin(added))
