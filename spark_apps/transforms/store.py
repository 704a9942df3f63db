"""The stream's store: the one Delta table a pipeline's stream writes, and the SQL of every table readers see.

Every micro-batch is one commit of the store, so a batch is in every table or in none, and every version of the
store maps to one log prefix. Its rows come in kinds (the partition column ``_kind``):

- ``record``: every log record of the batch as the log holds it (coordinates, append time, key, value) and what
  the platform made of it: the typed fields or the dead-letter reason, the payload fingerprint, whether it is late,
  and whether it was its event id's winner when its batch ran (the earliest record of the id in the log so far);
- ``displaced``: a winner a later record displaced (the same id earlier in the log, on a lower partition): its id
  and coordinates;
- ``gold.<table>``: rows of a gold table, its columns prefixed ``<table>__``. A table with a :class:`Fold` gets the
  partial rows of each batch's own events; every other row is a *reset*: the complete rows of a recompute key,
  which supersede every earlier row of that key (a key left with no rows gets one empty reset row);
- ``commit``: the batch itself: its offsets, counts and duration, the last thing readers need to align on it.

The tables readers query are views of the store, each a pure function of it, and so of the log prefix a version
of it reflects: ``bronze.events_raw`` (records, with a winner that was displaced no longer counted as one),
``stream.dead_letters``, ``silver.event_candidates``, ``silver.events``, ``silver.late_events``,
``silver.duplicates``, ``gold.<table>`` (the rows since each key's latest reset, folded) and
``stream.commits``. Each view's SQL takes the store as a relation, so the same text serves the catalog's view
(the latest version), an audit or a serving cut (``VERSION AS OF``) and the batch recompute (its own frames): how a
micro-batch split a key's events never shows, only the fold of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_apps.pipeline.declaration import COLUMN_SEPARATOR, GoldTable, Pipeline, TableNames
from spark_apps.pipeline.folds import BATCH, EMPTY, RESET, fold_query, folded, listed, q
from spark_apps.transforms.events import (
    HIGH_WATER_COLUMN,
    WINNER_POSITION,
    at_position,
    duplicates_query,
    late_events_query,
    lateness_flag,
)
from spark_apps.transforms.parsing import COORDINATE_COLUMNS, FINGERPRINT_COLUMN, REASON_COLUMN, event_columns

if TYPE_CHECKING:
    from spark_apps.core.settings import Settings
    from spark_apps.pipeline.lateness import LatenessRule

KIND = "_kind"
# The store's second partition column: a micro-batch's rows go to epoch ``batch_id // epoch_batches``, so
# compaction can replace whole epochs the stream no longer appends to (``stream.compaction``).
EPOCH = "_epoch"
# A micro-batch's commit names its epoch in its metadata under this key, so compaction finds the newest epoch in the
# log instead of opening every file of the store.
EPOCH_KEY = "epoch"
# The key of a compaction's commit metadata (which batches the compacted base covers): a commit that changes no row.
COMPACTION = "compaction"
RECORD, DISPLACED, COMMIT = "record", "displaced", "commit"
WINNER, LATE = "is_winner", "is_late"
# The commit row's columns, as ``stream.commits`` names them; ``batch_id`` is the row's ``_batch_id``.
COMMIT_COLUMNS = ("pipeline", "app_id", "topic", "start_offsets", "end_offsets", "records", "dead_letters",
                  "duration_ms")


def gold_kind(name: str) -> str:
    return f"gold.{name}"


def gold_column(table: str, column: str) -> str:
    """A gold table's column in the store: ``order_status__order_id``."""
    return f"{table}{COLUMN_SEPARATOR}{column}"


def commit_column(column: str) -> str:
    return f"{COMMIT}{COLUMN_SEPARATOR}{column}"


# ---- the record columns ------------------------------------------------------------------------------------

def candidate_columns(pipeline: Pipeline, rule: LatenessRule) -> list[str]:
    """``silver.event_candidates``' columns: the typed fields, the coordinates, the fingerprint, and under the
    high-water-mark rule the mark each record was judged against."""
    columns = [*event_columns(pipeline.schema), "topic", "partition", "offset", "log_append_time",
               FINGERPRINT_COLUMN]
    return columns + [HIGH_WATER_COLUMN] if rule.uses_high_water_mark else columns


def record_columns(pipeline: Pipeline, rule: LatenessRule) -> list[str]:
    """A record's columns in the store and in ``bronze.events_raw``, in order."""
    extra = [HIGH_WATER_COLUMN] if rule.uses_high_water_mark else []
    return [*COORDINATE_COLUMNS, *event_columns(pipeline.schema), REASON_COLUMN, FINGERPRINT_COLUMN, *extra, LATE,
            WINNER]


def flagged_records(marked: DataFrame, positions: DataFrame, pipeline: Pipeline, rule: LatenessRule) -> DataFrame:
    """Records in the store's record columns with their flags: late or on time by the pipeline's rule (``marked``
    carries what the rule reads, see ``with_high_water``), and whether each is its id's winner, the record at the
    id's ``_winner_position`` in ``positions`` (``winner_position``). Dead letters get neither flag. The stream flags
    a micro-batch's records by the winners its state holds, the recompute every record of the log prefix by the
    winners of all of them."""
    schema = pipeline.schema
    valid = F.col(REASON_COLUMN).isNull()
    return (marked.join(positions, schema.id_field, "left")
            .withColumn(LATE, F.when(valid, lateness_flag(schema.time_field, rule)))
            .withColumn(WINNER, F.when(valid, F.coalesce(at_position(F.col(WINNER_POSITION)), F.lit(False))))
            .select(*[F.col(q(c)) for c in record_columns(pipeline, rule)]))


def on_time_winners(records: DataFrame, pipeline: Pipeline, rule: LatenessRule) -> DataFrame:
    """The flagged records that won their ids and are on time, in ``silver.events``' columns: every gold table's
    input."""
    return records.where(F.col(WINNER) & ~F.col(LATE)).select(
        *[F.col(q(c)) for c in (*candidate_columns(pipeline, rule), LATE)])


# ---- views of the store ---------------------------------------------------------------------------------------

def _of_kind(store: str, kind: str) -> str:
    return f"{store} WHERE {q(KIND)} = '{kind}'"


def bronze_query(store: str, pipeline: Pipeline, rule: LatenessRule) -> str:
    """``bronze.events_raw``: every record, its winner flag off once a later record displaced it."""
    columns = record_columns(pipeline, rule)
    id_field = pipeline.schema.id_field
    kept = [f"r.{q(c)}" for c in columns if c != WINNER]
    coordinates = (id_field, "partition", "offset")
    joined = " AND ".join(f"r.{q(c)} = d.{q(c)}" for c in coordinates)
    return (f"SELECT {', '.join(kept)}, (r.{q(WINNER)} AND d.{q('offset')} IS NULL) AS {q(WINNER)} "
            f"FROM (SELECT {listed(columns)} FROM {_of_kind(store, RECORD)}) r "
            f"LEFT JOIN (SELECT {listed(coordinates)} FROM {_of_kind(store, DISPLACED)}) d ON {joined}")


def dead_letters_query(store: str) -> str:
    """``stream.dead_letters``: the records that failed a check, raw, with the reason."""
    return (f"SELECT {listed(COORDINATE_COLUMNS)}, {q(REASON_COLUMN)} AS {q('reason')} "
            f"FROM {_of_kind(store, RECORD)} AND {q(REASON_COLUMN)} IS NOT NULL")


def candidates_query(store: str, pipeline: Pipeline, rule: LatenessRule) -> str:
    """``silver.event_candidates``: every valid record, typed."""
    return (f"SELECT {listed(candidate_columns(pipeline, rule))} "
            f"FROM {_of_kind(store, RECORD)} AND {q(REASON_COLUMN)} IS NULL")


def events_query(store: str, pipeline: Pipeline, rule: LatenessRule) -> str:
    """``silver.events``: one row per event id, its winner (its earliest record in the log), flagged late or not."""
    return (f"SELECT {listed([*candidate_columns(pipeline, rule), LATE])} "
            f"FROM ({bronze_query(store, pipeline, rule)}) WHERE {q(WINNER)}")


def commits_query(store: str) -> str:
    """``stream.commits``: one row per micro-batch, its offsets and counts."""
    columns = [f"{q(commit_column(c))} AS {q(c)}" for c in COMMIT_COLUMNS]
    columns.insert(2, f"{q(BATCH)} AS {q('batch_id')}")
    return f"SELECT {', '.join(columns)} FROM {_of_kind(store, COMMIT)}"


def gold_rows_query(store: str, gold: GoldTable, columns: Sequence[str]) -> str:
    """A gold table's rows in the store, under its own column names, with their batch and reset flags."""
    renamed = ", ".join(f"{q(gold_column(gold.name, c))} AS {q(c)}" for c in columns)
    return f"SELECT {renamed}, {listed((BATCH, RESET, EMPTY))} FROM {_of_kind(store, gold_kind(gold.name))}"


def view_queries(store: str, pipeline: Pipeline, rule: LatenessRule, gold_columns: Mapping[str, Sequence[str]],
                 tables: TableNames) -> dict[str, str]:
    """Every view of the store by its name in ``tables`` (its generation's): its SQL over ``store`` (the store's
    relation, e.g. ``delta.`path``` or ``delta.`path` VERSION AS OF 7``). ``gold_columns``: each gold table's stored
    columns."""
    events = f"({events_query(store, pipeline, rule)})"
    candidates = f"({candidates_query(store, pipeline, rule)})"
    views = {tables.bronze: bronze_query(store, pipeline, rule),
             tables.dead_letters: dead_letters_query(store),
             tables.candidates: candidates_query(store, pipeline, rule),
             tables.events: events_query(store, pipeline, rule),
             tables.late_events: late_events_query(events),
             tables.duplicates: duplicates_query(pipeline.schema.id_field, candidates, events),
             tables.commits: commits_query(store)}
    for gold in pipeline.gold_tables:
        rows = f"({gold_rows_query(store, gold, gold_columns[gold.name])})"
        views[tables.gold(gold.name)] = fold_query(rows, gold, gold_columns[gold.name])
    return views


def view_name(tables: TableNames, name: str) -> str:
    """``name`` as the view of ``tables``' generation it names (a replay's ``gold.x__g2`` for ``gold.x``)."""
    if not tables.generation or name.endswith(f"__{tables.generation}"):
        return name
    return f"{name}__{tables.generation}"


# ---- rows of the store, and the batch's own folds --------------------------------------------------------------

def stored_gold_rows(gold: GoldTable, rows: DataFrame, batch_id: int, reset: bool) -> DataFrame:
    """Rows of ``gold`` (its stored columns) as the store holds them: prefixed, of its kind, with the batch and
    whether they reset their keys. One SQL projection, so building it is one call into Spark whatever the columns
    (the stream builds it in every micro-batch)."""
    return rows.selectExpr(*[f"{q(c)} AS {q(gold_column(gold.name, c))}" for c in rows.columns],
                           *_gold_flags(gold, batch_id, reset, empty=False))


def empty_resets(gold: GoldTable, keys: DataFrame, batch_id: int) -> DataFrame:
    """One empty reset row per recompute key of ``keys``: the key has no rows any more."""
    return keys.selectExpr(*[f"{q(k)} AS {q(gold_column(gold.name, k))}" for k in gold.recompute_keys],
                           *_gold_flags(gold, batch_id, reset=True, empty=True))


def _gold_flags(gold: GoldTable, batch_id: int, reset: bool, empty: bool) -> list[str]:
    return [f"'{gold_kind(gold.name)}' AS {q(KIND)}", f"CAST({int(batch_id)} AS BIGINT) AS {q(BATCH)}",
            f"{str(reset).lower()} AS {q(RESET)}", f"{str(empty).lower()} AS {q(EMPTY)}"]


def gold_rows(gold: GoldTable, on_time_events: DataFrame, settings: Settings) -> DataFrame:
    """``gold``'s rows from on-time events: ``compute`` of their key rows, folded when the table folds. What the
    batch recompute writes, and what the stream's view of the table must equal."""
    return folded(gold, gold.compute(gold.key_rows(on_time_events, settings), settings))


def commit_row(values: Mapping[str, object], batch_id: int) -> dict[str, object]:
    """The store's commit row of a batch, from the values of ``COMMIT_COLUMNS``."""
    return {**{commit_column(c): values[c] for c in COMMIT_COLUMNS}, KIND: COMMIT, BATCH: batch_id}


# What the records of bronze became, as the count contract names them (``record_counts``).
RECORD_COUNTS = ("records", "dead_letters", "candidates", "events", "duplicates", "late_events")


def record_counts(bronze: DataFrame) -> DataFrame:
    """One row: ``bronze``'s records (the stream's view, or the batch's snapshot: both carry the reason and the
    flags), the dead letters among them, the candidates, the winners (``silver.events``), the other candidates
    (``silver.duplicates``) and the late winners (``silver.late_events``), by the predicates their views use."""
    valid = F.col(REASON_COLUMN).isNull()
    winner = valid & F.col(WINNER)
    return bronze.agg(F.count(F.lit(1)).alias("records"), F.count(F.when(~valid, True)).alias("dead_letters"),
                      F.count(F.when(valid, True)).alias("candidates"), F.count(F.when(winner, True)).alias("events"),
                      F.count(F.when(valid & ~F.col(WINNER), True)).alias("duplicates"),
                      F.count(F.when(winner & F.col(LATE), True)).alias("late_events"))


def kind_is(kind: str) -> Column:
    return F.col(KIND) == F.lit(kind)
