"""Which sessions of a gold table of sessions (``declaration.Sessions``) some events can change.

Sessions are maximal runs of a key's events, each at most ``gap_s`` after the one before. An event at time ``t``
that is added or removed can change only the sessions of its key that reach within ``gap_s`` of ``t``: it lands in
one, grows one, bridges two, or (removed) splits one. Its key's span is ``t`` together with those sessions, and
every key's span is the smallest closed range holding all of its events' spans.

Recomputing a key's sessions from the events inside its span, and replacing the sessions that start inside it,
gives what recomputing the whole key gives. The events just outside a span are more than ``gap_s`` from its ends:
the earlier neighbour of the span's first session ended the session before it, by the maximality of the
sessions before the change, and an event nearer to a changed time would have put its session in the span. So the
runs inside the span neither merge with nor split off anything outside it, and every session that starts inside
it also ends inside it.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_apps.pipeline.declaration import SPAN_HI, SPAN_LO, Sessions


def session_spans(changed: DataFrame, sessions: DataFrame, keys: tuple[str, ...], spec: Sessions) -> DataFrame:
    """Per key of the ``changed`` rows (``key_rows`` of the events added or removed), the span to recompute:
    ``SPAN_LO`` and ``SPAN_HI``, from those rows' times and the ``sessions`` (the table's rows as they are) that
    reach within ``spec.gap_s`` of one of them. A row with a null key or time changes no session."""
    gap_micros = spec.gap_s * 1_000_000
    times = (changed.select(*keys, F.col(spec.time_column).alias("_t"))
             .dropna().distinct())
    touched = times.select(*keys).distinct()
    near = (sessions.join(F.broadcast(touched), list(keys), "left_semi").alias("s")
            .join(times.alias("c"), [F.col(f"s.{k}") == F.col(f"c.{k}") for k in keys])
            .where(F.unix_micros(F.col("c._t")).between(
                F.unix_micros(F.col(f"s.{spec.start_column}")) - F.lit(gap_micros),
                F.unix_micros(F.col(f"s.{spec.end_column}")) + F.lit(gap_micros)))
            .select(*[F.col(f"s.{k}").alias(k) for k in keys],
                    F.col(f"s.{spec.start_column}").alias("_lo"), F.col(f"s.{spec.end_column}").alias("_hi")))
    return (times.select(*keys, F.col("_t").alias("_lo"), F.col("_t").alias("_hi")).unionByName(near)
            .groupBy(*keys).agg(F.min("_lo").alias(SPAN_LO), F.max("_hi").alias(SPAN_HI)))
