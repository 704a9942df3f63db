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

Sessions also compose: the sessions of a set of events are the sessions of any split of it, merged where they come
within ``gap_s`` of each other (the fold of a table of sessions, ``pipeline.folds``). A cut between two
consecutive events of the whole set is a gap of more than ``gap_s`` with no event in it, so no part's session
crosses it; and two parts' sessions that overlap or lie within ``gap_s`` have consecutive events of the whole set
within ``gap_s`` between them. That is what lets a stream write each micro-batch's own sessions and fold them, and
an incremental audit extend the stored sessions, without reading the events of a session again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_apps.pipeline.declaration import SPAN_HI, SPAN_LO, Sessions
from spark_apps.pipeline.folds import folded

if TYPE_CHECKING:
    from spark_apps.core.settings import Settings
    from spark_apps.pipeline.declaration import GoldTable


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


def extends_sessions(gold: GoldTable) -> bool:
    """The table's sessions fold (a table of sessions with a ``Fold``), so added events extend the stored ones."""
    return gold.sessions is not None and gold.fold is not None


def sessions_after(gold: GoldTable, table: DataFrame, added: DataFrame, lost: DataFrame | None, on_time: DataFrame,
                   within: Callable[[DataFrame, str | None], DataFrame], settings: Settings) -> DataFrame:
    """The sessions of a table of sessions that folds, inside some spans of its keys, after silver rows joined and
    left it: what replaces its rows there.

    ``table``: the table's rows as they are; ``added``: the on-time silver rows that joined; ``lost``: the silver rows
    that left (None when none did); ``on_time``: every on-time silver row, read only for a key a row left;
    ``within(rows, column)``: those rows whose key's span holds their ``column`` (the table's start column when
    None; ``KeySpans.rows_of``).

    A key no row left keeps its stored sessions, merged with the added rows' own (the table's fold,
    ``pipeline.folds``): no event of its sessions is read. A key a row left is recomputed from its events, since a
    removal can split a session.
    Recomputing every span from silver reads every event of a session the added rows extend, and a key that never
    pauses for a gap has one session as long as the log."""
    keys, spec = gold.recompute_keys, gold.sessions
    parts = within(table, None).unionByName(
        gold.compute(within(gold.key_rows(added, settings), spec.time_column), settings))
    if lost is None:
        return folded(gold, parts)
    lost_keys = F.broadcast(gold.key_rows(lost, settings).select(*keys).dropna().distinct())
    kept = folded(gold, parts.join(lost_keys, list(keys), "left_anti"))
    events = within(gold.key_rows(on_time, settings), spec.time_column)
    return kept.unionByName(gold.compute(events.join(lost_keys, list(keys), "left_semi"), settings))
