"""Folding a gold table's stored rows into the table: the SQL every reader of a gold table runs.

A gold table's rows in the stream's store (``transforms.store``) are either partial rows (a table with a
:class:`~spark_apps.pipeline.declaration.Fold`: ``compute`` of one micro-batch's events) or resets (the complete
rows of a recompute key, superseding every earlier row of it). Per recompute key the table is the rows since its
latest reset, and for a table that folds, their merge. The text is SQL because the tables are catalog views read by
any SQL client; the batch recompute folds its own partial rows with the very same text (:func:`folded`), so stream
and batch share one definition of every gold row.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_apps.pipeline.declaration import SESSION, GoldTable

BATCH, RESET, EMPTY = "_batch_id", "_reset", "_empty"


def q(name: str) -> str:
    """A column or table name as a Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def listed(names: Sequence[str], prefix: str = "") -> str:
    return ", ".join(f"{prefix}{q(n)}" for n in names)


def _live(rows: str, gold: GoldTable) -> str:
    """The rows of each recompute key since its latest reset, empty resets left out."""
    keys = listed(gold.recompute_keys)
    since = f"max(CASE WHEN {q(RESET)} THEN {q(BATCH)} END) OVER (PARTITION BY {keys})"
    return (f"SELECT * FROM (SELECT *, {since} AS {q('_since')} FROM {rows}) "
            f"WHERE {q(BATCH)} >= coalesce({q('_since')}, -1) AND NOT {q(EMPTY)}")


def _merged(live: str, gold: GoldTable, extra: Sequence[str] = ()) -> str:
    """The live rows of a folding table merged per primary key (per merged session), ``extra`` aggregates added."""
    merges = ", ".join([*gold.fold.merge, *extra])
    if gold.sessions:
        return _merged_sessions(live, gold, merges)
    return f"SELECT {listed(gold.primary_keys)}, {merges} FROM ({live}) GROUP BY {listed(gold.primary_keys)}"


def fold_query(rows: str, gold: GoldTable, columns: Sequence[str]) -> str:
    """SQL: the table ``gold`` from its rows (``rows``: a relation with its stored ``columns`` and ``_batch_id``,
    ``_reset``, ``_empty``): per recompute key, the rows since its latest reset, and with a fold, merged.

    The batch recompute folds its own partial rows with this text too, one reset row per key."""
    live = _live(rows, gold)
    if gold.fold is None:
        return f"SELECT {listed(columns)} FROM ({live})"
    output = ", ".join(gold.fold.output) if gold.fold.output else "*"
    return f"SELECT {output} FROM ({_merged(live, gold)})"


def compacted_query(rows: str, gold: GoldTable, columns: Sequence[str], segment: bool = False) -> str:
    """SQL: what compaction keeps of ``rows`` (as :func:`fold_query` takes them): per recompute key, its live rows
    in the stored ``columns``, merged per primary key when the table folds, each with the batch of the key's newest
    row as ``_batch_id``, and with ``_reset`` and ``_empty``.

    Of a table's oldest rows (``segment`` false) every kept row is a reset: written in place of all of ``rows``, they
    leave the table unchanged. A reset of a key's live rows supersedes what they superseded, later rows fold onto it
    as they folded onto those rows (a fold's merge is associative), and a key with no live rows keeps none.

    Of a ``segment`` (rows of some batches with older ones before them, which stay), a kept row is a reset only when
    its key had one in the segment; a key without one keeps its merged partial rows, which fold onto the older rows
    as the segment's did. A key whose latest reset in the segment was empty, with no row after it, keeps one empty
    reset: it must still supersede the older rows."""
    keys = listed(gold.recompute_keys)
    since = f"max(CASE WHEN {q(RESET)} THEN {q(BATCH)} END) OVER (PARTITION BY {keys})"
    marked = (f"SELECT *, {since} AS {q('_since')}, max({q(BATCH)}) OVER (PARTITION BY {keys}) AS {q('_last')} "
              f"FROM {rows}")
    live = f"SELECT * FROM ({marked}) WHERE {q(BATCH)} >= coalesce({q('_since')}, -1) AND NOT {q(EMPTY)}"
    reset = f"{q('_since')} IS NOT NULL" if segment else "true"
    if gold.fold is None:
        kept = f"SELECT {listed(columns)}, {q('_last')} AS {q(BATCH)}, {reset} AS {q(RESET)}, false AS {q(EMPTY)} " \
               f"FROM ({live})"
    else:
        merged = _merged(live, gold, (f"max({q('_last')}) AS {q(BATCH)}", f"bool_or({reset}) AS {q(RESET)}"))
        made = set(merged_columns(gold))
        values = ", ".join(q(c) if c in made else f"NULL AS {q(c)}" for c in columns)
        kept = f"SELECT {values}, {q(BATCH)}, {q(RESET)}, false AS {q(EMPTY)} FROM ({merged})"
    if not segment:
        return kept
    alive = f"CASE WHEN {q(BATCH)} >= coalesce({q('_since')}, -1) AND NOT {q(EMPTY)} THEN 1 END"
    values = ", ".join(q(c) if c in gold.recompute_keys else f"NULL AS {q(c)}" for c in columns)
    emptied = (f"SELECT {values}, max({q('_last')}) AS {q(BATCH)}, true AS {q(RESET)}, true AS {q(EMPTY)} "
               f"FROM ({marked}) GROUP BY {keys} HAVING count({alive}) = 0")
    return f"{kept} UNION ALL {emptied}"


def merged_columns(gold: GoldTable) -> list[str]:
    """The columns of a folding table's merged rows: its keys (and a session's start and end) and each merge's
    alias. A partial column no merge gives is read by nothing after the merge; compaction keeps it null."""
    keys = list(gold.primary_keys)
    if gold.sessions:
        keys = [*gold.recompute_keys, gold.sessions.start_column, gold.sessions.end_column]
    return [*keys, *(re.split(r"\s+AS\s+", m, flags=re.IGNORECASE)[-1].strip().strip("`") for m in gold.fold.merge)]


def _merged_sessions(live: str, gold: GoldTable, merges: str) -> str:
    """The sessions of partial sessions: each starts a new one where it begins more than the gap after the latest
    end before it (ordered by start, then end), and the sessions of one run merge: the least start, the greatest
    end and ``merges`` (``transforms.sessions`` says why that is the sessions of all events)."""
    spec = gold.sessions
    keys = listed(gold.recompute_keys)
    start, end = q(spec.start_column), q(spec.end_column)
    order = f"PARTITION BY {keys} ORDER BY {start}, {end}"
    reach = f"max(unix_micros({end})) OVER ({order} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)"
    begins = f"CAST(coalesce(unix_micros({start}) - {reach} > {spec.gap_s * 1_000_000}, true) AS INT)"
    numbered = (f"SELECT *, sum({q('_begins')}) OVER ({order} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) "
                f"AS {q(SESSION)} FROM (SELECT *, {begins} AS {q('_begins')} FROM ({live}))")
    return (f"SELECT {keys}, min({start}) AS {start}, max({end}) AS {end}, {merges} "
            f"FROM ({numbered}) GROUP BY {keys}, {q(SESSION)}")


def folded(gold: GoldTable, partial: DataFrame) -> DataFrame:
    """``gold``'s rows from partial rows of it (``compute``'s, with a fold), by the same SQL its view folds the
    store's rows with; rows of a table without a fold are returned as they are."""
    if gold.fold is None:
        return partial
    rows = (partial.withColumn(BATCH, F.lit(0).cast("long")).withColumn(RESET, F.lit(True))
            .withColumn(EMPTY, F.lit(False)))
    return partial.sparkSession.sql(fold_query("{rows}", gold, partial.columns), rows=rows)


