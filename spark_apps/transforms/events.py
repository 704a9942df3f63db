"""Pure DataFrame -> DataFrame functions shared by the stream (on touched keys) and the batch (on all).

Nothing here reads the clock, random numbers, micro-batch boundaries or arrival order: only event
fields, the log append time and log coordinates. That is what makes replay and recompute agree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark_apps.pipeline.lateness import LatenessRule
from spark_apps.transforms.sessions import session_spans

if TYPE_CHECKING:
    from spark_apps.core.settings import Settings
    from spark_apps.pipeline.declaration import GoldTable

COORDINATES = ("topic", "partition", "offset")
HIGH_WATER_COLUMN = "partition_high_water"
DUPLICATE = "duplicate"
CONFLICT = "conflict"
# An event id's winner: the log position (partition, offset) of its earliest valid record, as a struct.
WINNER_POSITION = "_winner_position"


def lateness_flag(event_time: str, rule: LatenessRule) -> Column:
    """Late when the event's time is more than the allowed lateness before what the rule measures against: the
    record's log append time, or its partition's high-water mark (``with_high_water``; none yet: on time)."""
    reference = F.col(HIGH_WATER_COLUMN) if rule.uses_high_water_mark else F.col("log_append_time")
    lag_s = reference.cast("double") - F.col(event_time).cast("double")
    late = lag_s > F.lit(float(rule.allowed_s))
    return F.coalesce(late, F.lit(False)) if rule.uses_high_water_mark else late


def with_high_water(candidates: DataFrame, event_time: str, rule: LatenessRule,
                    carried: Mapping[int, int] | None = None) -> DataFrame:
    """Under the high-water-mark rule, each candidate gets its partition's mark: the greatest event time of the
    candidates before it in offset order, future ones not counted. ``carried`` (partition -> epoch microseconds)
    is the mark the records before these left: empty for a recompute of the whole log, what the earlier
    micro-batches left for the stream. Under the append-time rule the candidates are returned as they are."""
    if not rule.uses_high_water_mark:
        return candidates
    before = Window.partitionBy("partition").orderBy("offset").rowsBetween(Window.unboundedPreceding, -1)
    mark = F.max(_counted(event_time, rule)).over(before)
    if carried:
        mark = F.greatest(mark, per_partition(carried, F.col("partition")))
    return candidates.withColumn(HIGH_WATER_COLUMN, F.timestamp_micros(mark))


def per_partition(values: Mapping[int, int], partition: Column) -> Column:
    """The value ``values`` (partition -> a mark or an offset) gives ``partition``; null for a partition it lacks."""
    if not values:
        return F.lit(None).cast("long")
    return F.try_element_at(F.create_map(*[F.lit(v) for p, o in sorted(values.items()) for v in (p, o)]), partition)


def high_water_marks(candidates: DataFrame, event_time: str, rule: LatenessRule) -> DataFrame:
    """Per partition, the mark the candidates leave for the records after them (``partition``, ``mark`` in epoch
    microseconds; no row for a partition whose candidates all count for nothing)."""
    return (candidates.groupBy("partition").agg(F.max(_counted(event_time, rule)).alias("mark"))
            .where(F.col("mark").isNotNull()))


def _counted(event_time: str, rule: LatenessRule) -> Column:
    """A candidate's event time as it counts toward the high-water mark: not at all when it is from the future."""
    return F.when(~future_flag(event_time, rule.future_skew_s), F.unix_micros(F.col(event_time)))


def future_flag(event_time: str, skew_s: int) -> Column:
    """From the future when the event claims to have happened more than ``skew_s`` after the broker appended it:
    judged against the append time, not the clock, so stream and batch count the same events."""
    ahead_s = F.col(event_time).cast("double") - F.col("log_append_time").cast("double")
    return ahead_s > F.lit(float(skew_s))


def _ranked(candidates: DataFrame, id_field: str) -> DataFrame:
    """Rank each event's records by log position; rank 1 is the winner (lowest partition, offset)."""
    order = Window.partitionBy(id_field).orderBy(F.col("partition").asc(), F.col("offset").asc())
    return candidates.withColumn("_rank", F.row_number().over(order))


def winner_position(valid: Column) -> Column:
    """Aggregate: the log position of an event id's winner among some of its records, the least (partition, offset)
    of the ``valid`` ones. The least of a set is the least of the leasts of its parts, so the stream keeps it per id
    in Spark's state store from batch to batch, and the batch recompute takes it over the whole log at once."""
    return F.min(F.when(valid, F.struct(F.col("partition"), F.col("offset"))))


def at_position(position: Column) -> Column:
    """This row is the record at ``position`` (a ``winner_position``)."""
    return (F.col("partition") == position.getField("partition")) & (F.col("offset") == position.getField("offset"))


def winners(candidates: DataFrame, id_field: str, time_field: str, rule: LatenessRule) -> DataFrame:
    """One row per event id: its first record in the log, flagged late or on time."""
    return (_ranked(candidates, id_field).where("_rank = 1").drop("_rank")
            .withColumn("is_late", lateness_flag(time_field, rule)))


def gold_inputs_changed(new_records: DataFrame, displaced: DataFrame, time_field: str,
                        rule: LatenessRule) -> DataFrame:
    """The silver rows whose gold keys new records can change: the new on-time records, and the earlier winners of
    their ids they ``displaced`` (:func:`displaced_winners`). A late record is in no gold row, and an earlier
    winner that still wins changes none; either would only widen the keys, and the time range a read of silver
    skips files by. ``new_records`` carry what ``lateness_flag`` reads."""
    return new_records.where(~lateness_flag(time_field, rule)).unionByName(displaced.select(*new_records.columns))


def displaced_winners(earlier_winners: DataFrame, winners_now: DataFrame, id_field: str) -> DataFrame:
    """The ``earlier_winners`` that ``winners_now`` no longer holds: the silver rows new records took away."""
    coordinates = [id_field, "partition", "offset"]
    return earlier_winners.join(winners_now.select(*coordinates), coordinates, "left_anti")


def added_winners(winners_now: DataFrame, new_records: DataFrame, id_field: str) -> DataFrame:
    """The on-time rows of ``winners_now`` that are ``new_records``: the silver rows new records added to gold's
    input."""
    coordinates = [id_field, "partition", "offset"]
    return winners_now.where(~F.col("is_late")).join(new_records.select(*coordinates), coordinates, "left_semi")


def earlier_in_log(record: str, than: str) -> str:
    """SQL: the record aliased ``record`` sits before the one aliased ``than`` in the log (lower partition, then
    lower offset). The winner of an event id is the record no other record of that id is earlier than."""
    return (f"({record}.partition < {than}.partition OR "
            f"({record}.partition = {than}.partition AND {record}.offset < {than}.offset))")


def late_events_query(events: str) -> str:
    """``silver.late_events``: the events flagged late. ``events`` is a table name or a ``{placeholder}``."""
    return f"SELECT * FROM {events} WHERE is_late"


def duplicates_query(id_field: str, candidates: str, events: str) -> str:
    """``silver.duplicates``: every record of an event id but its winner, an exact ``duplicate`` (same payload
    fingerprint) or a ``conflict``, with the winner it lost to. ``candidates`` and ``events`` are table names or
    ``{placeholders}``; the same text defines the stream's view and computes the batch's snapshot."""
    key = "`" + id_field.replace("`", "``") + "`"
    return (f"SELECT c.{key}, c.topic, c.partition, c.offset, c.log_append_time, c.payload_fingerprint, "
            f"CASE WHEN c.payload_fingerprint = e.payload_fingerprint THEN '{DUPLICATE}' ELSE '{CONFLICT}' END "
            "AS kind, e.partition AS winner_partition, e.offset AS winner_offset, "
            "e.payload_fingerprint AS winner_fingerprint "
            f"FROM {candidates} c JOIN {events} e ON c.{key} = e.{key} "
            "WHERE c.partition <> e.partition OR c.offset <> e.offset")


def late_events(events: DataFrame) -> DataFrame:
    """The events flagged late (``late_events_query`` over a DataFrame)."""
    return events.sparkSession.sql(late_events_query("{events}"), events=events)


def duplicates(candidates: DataFrame, events: DataFrame, id_field: str) -> DataFrame:
    """Every record that lost its event id to the winner in ``events`` (``duplicates_query`` over DataFrames)."""
    return candidates.sparkSession.sql(duplicates_query(id_field, "{candidates}", "{events}"),
                                       candidates=candidates, events=events)


def touched_keys(rows: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """The distinct keys some rows belong to."""
    return rows.select(*keys).dropna(subset=list(keys)).distinct()


def gold_keys_touched(gold: GoldTable, touched: DataFrame, settings: Settings) -> DataFrame:
    """The keys of ``gold`` whose rows some silver events may change: those the ``touched`` events belong to."""
    return touched_keys(gold.key_rows(touched, settings), gold.recompute_keys)


def gold_changes(gold: GoldTable, touched: DataFrame, current: Callable[[], DataFrame],
                 settings: Settings) -> DataFrame:
    """What of ``gold`` the ``touched`` silver events (added, or displaced as winners) may change: the keys they
    belong to, or for a table of sessions each such key's span (``transforms.sessions``), found against the
    table's rows as ``current`` reads them. The stream (a batch's on-time records and the winners they displaced)
    and the incremental audit (the new on-time records and the earlier winners they displaced) both recompute
    exactly these, so gold is the same function of the log on both."""
    if gold.sessions is None:
        return gold_keys_touched(gold, touched, settings)
    return session_spans(gold.key_rows(touched, settings), current(), gold.recompute_keys, gold.sessions)


def rows_of_keys(rows: DataFrame, keys_df: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """Only the rows whose key is among ``keys_df``."""
    return rows.join(F.broadcast(keys_df), list(keys), "left_semi")
