"""The determinism guard: a gold table's functions must give the same rows for the same events.

Replay rebuilds a table from offset 0 and the batch job recomputes it from the same log prefix;
reconciliation then compares the results exactly. That only holds when ``key_rows``, ``compute`` and a
``Fold``'s SQL depend on their input rows alone. The guard builds both plans on an empty frame, walks Spark's
analyzed logical plan and refuses, before any table is created, a plan that uses:

- an expression Spark itself marks non-deterministic: ``rand``, ``randn``, ``uuid``, ``shuffle``,
  ``monotonically_increasing_id``, ``spark_partition_id``, ``input_file_name``, a Python UDF marked
  ``asNondeterministic()``...;
- the clock: ``current_timestamp``/``now``, ``current_date``, ``current_time``, ``localtimestamp``.
  Spark calls these deterministic because they are fixed for one query, but the next run reads
  another time;
- an aggregate that picks by arrival order in a group-by (``first``, ``last``, ``any_value``, and
  ``collect_list``/``collect_set`` unless sorted in the same expression): Spark calls them
  deterministic, yet the stream sees a key's rows in another order than the batch. Over a window
  with an ORDER BY they are allowed: the ordering decides.

It cannot see a Python UDF that calls ``random`` but is declared deterministic, nor ties in an
ordering (``min_by``, ``row_number``); order by a unique column such as the event id as well.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pyspark.sql import DataFrame

from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import Settings
from spark_apps.pipeline.declaration import Pipeline
from spark_apps.pipeline.folds import folded

CLOCK_READERS = frozenset({"CurrentTimestamp", "Now", "CurrentDate", "CurrentTime", "LocalTimestamp",
                           "CurrentBatchTimestamp"})
ARRIVAL_ORDER_PICKS = frozenset({"First", "Last", "AnyValue"})
COLLECTIONS = frozenset({"CollectList", "CollectSet"})
ARRAY_SORTS = frozenset({"ArraySort", "SortArray"})
# A subquery is as deterministic as its plan, which the walk visits itself and names the culprit in.
SUBQUERY_EXPRESSION = "org.apache.spark.sql.catalyst.expressions.SubqueryExpression"


class NonDeterministicPlan(PlatformError):
    """A gold table's functions would give different rows for the same events on another run."""


@dataclass(frozen=True)
class _Context:
    """What encloses an expression: an ordered window or an array sort makes an arrival-order pick safe."""

    in_ordered_window: bool = False
    in_array_sort: bool = False


def assert_deterministic(pipeline: Pipeline, on_time_events: DataFrame, settings: Settings) -> None:
    """Raise NonDeterministicPlan naming every gold table whose ``key_rows`` or ``compute`` plan is
    not deterministic, and the expressions that make it so.

    ``on_time_events`` only lends its schema: the plans are built on an empty frame of it, so the
    engine's own upstream plan (and its data) never enters the check.
    """
    empty = on_time_events.sparkSession.createDataFrame([], on_time_events.schema)
    problems = []
    for gold in pipeline.gold_tables:
        keyed = gold.key_rows(empty, settings)
        computed = gold.compute(keyed, settings)
        in_key_rows = non_deterministic_expressions(keyed)
        in_compute = [found for found in non_deterministic_expressions(computed) if found not in in_key_rows]
        in_fold = [] if gold.fold is None else [
            found for found in non_deterministic_expressions(folded(gold, computed))
            if found not in in_key_rows and found not in in_compute]
        uses = [f"{function} uses non-deterministic {', '.join(found)}"
                for function, found in (("key_rows", in_key_rows), ("compute", in_compute), ("fold", in_fold))
                if found]
        if uses:
            problems.append(f"pipeline {pipeline.name!r}, gold table {gold.name!r}: {'; '.join(uses)}")
    if problems:
        raise NonDeterministicPlan(" | ".join(problems) + "; replay and reconciliation need the same output "
                                   "for the same log prefix (README: why compute functions must be deterministic)")


def non_deterministic_expressions(frame: DataFrame) -> list[str]:
    """The offending expressions of a DataFrame's analyzed plan, each once, in plan order."""
    found: list[str] = []
    subquery_class = frame.sparkSession._jvm.java.lang.Class.forName(SUBQUERY_EXPRESSION)
    for node in _plan_nodes(frame._jdf.queryExecution().analyzed()):
        for expression in _items(node.expressions()):
            _visit(expression, _Context(), found, subquery_class)
    return list(dict.fromkeys(found))


def _items(scala_seq) -> list:
    return [scala_seq.apply(index) for index in range(scala_seq.size())]


def _plan_nodes(plan) -> list:
    """The plan and every plan below it, subqueries included."""
    nodes = [plan]
    for below in (*_items(plan.children()), *_items(plan.subqueries())):
        nodes.extend(_plan_nodes(below))
    return nodes


def _visit(expression, context: _Context, found: list[str], subquery_class) -> None:
    """Collect the problems of an expression tree, top down, telling each child what encloses it."""
    kind = expression.getClass().getSimpleName()
    children = _items(expression.children())
    problem = None if subquery_class.isInstance(expression) else _problem(expression, kind, children, context)
    if problem:
        found.append(problem)
    if kind == "WindowExpression":
        context = replace(context, in_ordered_window=not expression.windowSpec().orderSpec().isEmpty())
    elif kind in ARRAY_SORTS:
        context = replace(context, in_array_sort=True)
    for child in children:
        _visit(child, context, found, subquery_class)


def _problem(expression, kind: str, children: list, context: _Context) -> str | None:
    """How this expression breaks determinism, or None. Spark's own flag is inherited by every parent,
    so only the innermost non-deterministic expression is named."""
    if kind in CLOCK_READERS:
        return f"{_sql(expression)} (reads the clock)"
    if kind in COLLECTIONS and not (context.in_ordered_window or context.in_array_sort):
        return f"{_sql(expression)} (keeps arrival order; sort it with array_sort)"
    if kind in ARRIVAL_ORDER_PICKS and not context.in_ordered_window:
        return f"{_sql(expression)} (picks by arrival order; use min/max or min_by/max_by over a unique ordering)"
    if not expression.deterministic() and all(child.deterministic() for child in children):
        if kind == "PythonUDF":
            return f"{_sql(expression)} (a Python UDF marked non-deterministic)"
        return _sql(expression)
    return None


def _sql(expression) -> str:
    """The expression as SQL, without the attribute ids of its tree string; some have no SQL form."""
    from py4j.protocol import Py4JJavaError

    try:
        return expression.sql()
    except Py4JJavaError:
        return expression.toString()
