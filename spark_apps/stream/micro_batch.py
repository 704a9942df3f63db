"""What one micro-batch writes to the store, from its materialized rows (``stream.query``): pure DataFrame functions.

The batch's records get their flags (late or on time, their id's winner or not), and each gold table its rows: a
table that folds gets the partial rows of the batch's on-time winners alone; a table that does not, and any key a
displaced winner left, get resets recomputed from every on-time winner of the key (which only those paths read).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_apps.pipeline.declaration import GoldTable, Pipeline
from spark_apps.pipeline.folds import BATCH
from spark_apps.stream.query import RECORD_ROLE, RECORDS_OF_ID, ROLE, WINNER, WINNER_ROLE
from spark_apps.transforms.events import WINNER_POSITION, future_flag, per_partition, with_high_water
from spark_apps.transforms.parsing import REASON_COLUMN
from spark_apps.transforms.store import DISPLACED, KIND, RECORD, empty_resets, flagged_records, stored_gold_rows

if TYPE_CHECKING:
    from spark_apps.core.settings import Settings
    from spark_apps.io.key_sets import KeySet
    from spark_apps.pipeline.lateness import LatenessRule


@dataclass(frozen=True)
class Tally:
    """A batch's counts, and the event ids whose winner it displaced (the same id earlier in the log)."""

    valid: int
    dead: int
    future: int
    displacing: tuple[str, ...]
    marks: dict[int, int]


def split(batch: DataFrame) -> tuple[DataFrame, DataFrame]:
    """The batch's record rows and its winner rows (``stream.query``)."""
    records = batch.where(F.col(ROLE) == RECORD_ROLE).drop(ROLE, WINNER, RECORDS_OF_ID)
    winners = batch.where(F.col(ROLE) == WINNER_ROLE)
    return records, winners


def flagged(records: DataFrame, winners: DataFrame, pipeline: Pipeline, rule: LatenessRule,
            carried: Mapping[int, int] | None) -> DataFrame:
    """The batch's records with their flags (``transforms.store.flagged_records``), each id's winner from the
    state's winner rows; under the high-water-mark rule each record carries its partition's mark, from
    ``carried``."""
    schema = pipeline.schema
    positions = winners.select(schema.id_field, F.col(WINNER).alias(WINNER_POSITION))
    return flagged_records(with_high_water(records, schema.time_field, rule, carried), F.broadcast(positions),
                           pipeline, rule)


def tally(batch: DataFrame, start: Mapping[int, int], pipeline: Pipeline, rule: LatenessRule,
          settings: Settings) -> Tally:
    """One query over the batch's two roles (``stream.query``) for what it must know before it writes: its counts,
    and the ids whose earlier winner it displaced. An id's winner is in this batch when the winner's offset is at or
    after the batch's start in its partition (``start``: partition -> first offset; a partition it lacks starts
    here); the batch displaced an earlier winner when, besides, the log held more valid records of the id than the
    batch. Rows of one id sit in one partition of the batch, so the grouping needs no exchange. Under the
    high-water-mark rule a second query finds the marks the batch leaves for the next one."""
    from spark_apps.transforms.events import high_water_marks

    schema = pipeline.schema
    record = F.col(ROLE) == RECORD_ROLE
    valid = record & F.col(REASON_COLUMN).isNull()
    future = valid & future_flag(schema.time_field, settings.future_skew_s)
    here = F.col(WINNER).getField("offset") >= F.coalesce(per_partition(start, F.col(WINNER).getField("partition")),
                                                          F.lit(-1))
    per_id = batch.groupBy(schema.id_field).agg(
        F.count(F.when(valid, True)).alias("_valid"), F.count(F.when(record & ~valid, True)).alias("_dead"),
        F.count(F.when(future, True)).alias("_future"),
        F.max(F.when((F.col(ROLE) == WINNER_ROLE) & here, F.col(RECORDS_OF_ID))).alias("_won_of"))
    row = per_id.agg(*[F.coalesce(F.sum(f"_{name}"), F.lit(0)).alias(name) for name in ("valid", "dead", "future")],
                     F.sort_array(F.collect_list(F.when(F.col("_won_of") > F.col("_valid"), F.col(schema.id_field))))
                     .alias("displacing")).first()
    marks = {}
    if rule.uses_high_water_mark:
        records = batch.where(valid)
        marks = {int(r["partition"]): int(r["mark"])
                 for r in high_water_marks(records, schema.time_field, rule).collect()}
    return Tally(int(row["valid"]), int(row["dead"]), int(row["future"]), tuple(row["displacing"] or ()), marks)


def record_rows(records: DataFrame, batch_id: int) -> DataFrame:
    return records.withColumn(KIND, F.lit(RECORD)).withColumn(BATCH, F.lit(batch_id).cast("long"))


def displaced_rows(winners_before: DataFrame, id_field: str, batch_id: int) -> DataFrame:
    """One row per earlier winner the batch displaced: its id and coordinates."""
    return winners_before.select(id_field, "partition", "offset", F.lit(DISPLACED).alias(KIND),
                                 F.lit(batch_id).cast("long").alias(BATCH))


def partial_rows(gold: GoldTable, added: DataFrame, settings: Settings, batch_id: int,
                 reset_keys: DataFrame | None = None) -> DataFrame:
    """A folding table's partial rows of the batch's on-time winners, except for the keys it resets."""
    rows = gold.key_rows(added, settings)
    if reset_keys is not None:
        rows = rows.join(F.broadcast(reset_keys), list(gold.recompute_keys), "left_anti")
    return stored_gold_rows(gold, gold.compute(rows, settings), batch_id, reset=False)


def reset_rows(gold: GoldTable, affected: KeySet, inputs: DataFrame, settings: Settings, batch_id: int) -> DataFrame:
    """The complete rows of the ``affected`` keys, from every on-time winner of them (``inputs``: the winners
    before the batch that still win, and the batch's own), each a reset; a key left with no row gets an empty one.

    Only the rows of the affected keys are read: each key column's range, and for a table of windows their time
    range, bound the read, so Delta skips the files outside them (``io.key_sets``)."""
    if gold.windows is not None:
        inputs = affected.within_windows(inputs, gold.windows)
    rows = gold.compute(affected.rows_of(gold.key_rows(inputs, settings)), settings)
    left = affected.frame.join(rows.select(*gold.recompute_keys), list(gold.recompute_keys), "left_anti")
    return stored_gold_rows(gold, rows, batch_id, reset=True).unionByName(
        empty_resets(gold, left, batch_id), allowMissingColumns=True)
