"""Pure DataFrame -> DataFrame functions shared by the stream (on touched keys) and the batch (on all).

Nothing here reads the clock, random numbers, micro-batch boundaries or arrival order: only event
fields, the log append time and log coordinates. That is what makes replay and recompute agree.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

COORDINATES = ("topic", "partition", "offset")
DUPLICATE = "duplicate"
CONFLICT = "conflict"


def lateness_flag(event_time: str, allowed_lateness_s: int) -> Column:
    """Late when the broker appended the record more than ``allowed_lateness`` after it happened."""
    lag_s = F.col("log_append_time").cast("double") - F.col(event_time).cast("double")
    return lag_s > F.lit(float(allowed_lateness_s))


def future_flag(event_time: str, skew_s: int) -> Column:
    """From the future when the event claims to have happened more than ``skew_s`` after the broker appended it:
    judged against the append time, not the clock, so stream and batch count the same events."""
    ahead_s = F.col(event_time).cast("double") - F.col("log_append_time").cast("double")
    return ahead_s > F.lit(float(skew_s))


def _ranked(candidates: DataFrame, id_field: str) -> DataFrame:
    """Rank each event's records by log position; rank 1 is the winner (lowest partition, offset)."""
    order = Window.partitionBy(id_field).orderBy(F.col("partition").asc(), F.col("offset").asc())
    return (candidates
            .withColumn("_rank", F.row_number().over(order))
            .withColumn("_winner_fingerprint", F.first("payload_fingerprint").over(order))
            .withColumn("_winner_partition", F.first("partition").over(order))
            .withColumn("_winner_offset", F.first("offset").over(order)))


def winners(candidates: DataFrame, id_field: str, time_field: str, allowed_lateness_s: int) -> DataFrame:
    """One row per event id: its first record in the log, flagged late or on time."""
    return (_ranked(candidates, id_field).where("_rank = 1")
            .drop("_rank", "_winner_fingerprint", "_winner_partition", "_winner_offset")
            .withColumn("is_late", lateness_flag(time_field, allowed_lateness_s)))


def losers(candidates: DataFrame, id_field: str) -> DataFrame:
    """Every later record of an event id: an exact duplicate, or a conflict when its payload differs."""
    ranked = _ranked(candidates, id_field).where("_rank > 1")
    kind = F.when(F.col("payload_fingerprint") == F.col("_winner_fingerprint"), F.lit(DUPLICATE)) \
        .otherwise(F.lit(CONFLICT))
    return ranked.select(
        F.col(id_field), *[F.col(c) for c in COORDINATES], "log_append_time", "payload_fingerprint",
        kind.alias("kind"),
        F.col("_winner_partition").alias("winner_partition"),
        F.col("_winner_offset").alias("winner_offset"),
        F.col("_winner_fingerprint").alias("winner_fingerprint"),
    )


def touched_keys(rows: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """The distinct keys some rows belong to."""
    return rows.select(*keys).dropna(subset=list(keys)).distinct()


def rows_of_keys(rows: DataFrame, keys_df: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """Only the rows whose key is among ``keys_df``."""
    return rows.join(F.broadcast(keys_df), list(keys), "left_semi")
