"""One consistent cut of the log per pipeline: every serving view reads table versions that reflect the same offsets.

A pipeline's serving views all read one view, ``serving._cut_<pipeline>``. It pins every gold table to one Delta
version, a ``UNION ALL`` with one branch per table: the branch of ``order_status`` fills the columns
``order_status__<column>`` and holds typed NULLs in every other table's columns. ``serving.<table>`` selects its
columns from its own branch; Spark prunes the other branches before reading and pushes filters down to the table,
so a serving view scans only its own table, as a plain view of it would. One more branch, ``_cut``, is a single row
whose ``cut`` column holds the cut itself (basis, versions, offsets) as JSON: a reader that selects it in the same
statement as serving views learns exactly which cut that statement read.

Why one view: the metastore changes one view at a time. With one pinned view per table, a reader joining two of
them while they are being replaced could read two different log prefixes. Replacing the single cut view moves every
serving view of the pipeline in one metastore update, and Spark's analyzer resolves a relation once per statement,
so each statement reads one cut, however many serving views it joins. The cut's offsets and versions are in the cut
view's properties.

A view is replaced with ``ALTER VIEW ... AS``, never ``CREATE OR REPLACE VIEW``: Spark implements the latter as a
drop and a create, between which a reader finds no view at all.

Two writers move a cut: the serving state machine when it records decisions, and the stream after each
micro-batch has committed every table, when the cut follows the stream of its generation. A lock file per pipeline
serializes them; a dbt run holds it, so dbt reads one cut from start to finish while the stream skips moving it.
"""

from __future__ import annotations

import json
import logging
from contextlib import AbstractContextManager
from dataclasses import dataclass

from spark_apps.core.settings import Settings
from spark_apps.io.catalog import repr_sql, sql_escaped, table_path
from spark_apps.io.fencing import file_lock
from spark_apps.pipeline.target import Target

log = logging.getLogger(__name__)
SERVING_SCHEMA = "serving"
FOLLOWS_STREAM, FOLLOWS_AUDIT = "stream", "audit"
BRANCH_COLUMN = "served_table"
CUT_BRANCH, CUT_COLUMN = "_cut", "cut"
PROPERTY_PREFIX = "kappa.cut."


@dataclass(frozen=True)
class Member:
    """One gold table of a cut: the Delta table its serving view reads, at which version, reflecting which offsets."""

    table: str
    source: str
    version: int
    end_offsets: dict[int, int]

    @property
    def name(self) -> str:
        """``gold.order_status`` -> ``order_status``: its serving view's and its branch's name."""
        return self.table.split(".", 1)[1]


@dataclass(frozen=True)
class Cut:
    """What every serving view of one pipeline reads.

    ``follows`` says who moves it: ``stream`` (every gold table serves the stream; each micro-batch moves it) or
    ``audit`` (a table serves its batch snapshot; the cut is the reconciliation's: snapshots and the stream versions
    it proved equal to them). ``basis`` says which batch or run it is."""

    pipeline: str
    follows: str
    generation: str
    basis: str
    members: tuple[Member, ...]
    # The warehouse whose tables the members name: a stream of another warehouse on the same catalog (a test's, or a
    # copy's) never moves this cut.
    warehouse: str = ""

    @property
    def consistent(self) -> bool:
        """Every member reflects the same log offsets."""
        return len({json.dumps(sorted(m.end_offsets.items())) for m in self.members}) <= 1

    @property
    def end_offsets(self) -> dict[int, int]:
        """The offsets of the cut (of its first member, when it is not consistent)."""
        return self.members[0].end_offsets if self.members else {}

    def members_json(self) -> str:
        return json.dumps([{"table": m.table, "source": m.source, "version": m.version,
                            "end_offsets": {str(p): o for p, o in sorted(m.end_offsets.items())}}
                           for m in self.members], sort_keys=True)

    def properties(self) -> dict[str, str]:
        return {f"{PROPERTY_PREFIX}pipeline": self.pipeline, f"{PROPERTY_PREFIX}follows": self.follows,
                f"{PROPERTY_PREFIX}generation": self.generation, f"{PROPERTY_PREFIX}basis": self.basis,
                f"{PROPERTY_PREFIX}members": self.members_json(), f"{PROPERTY_PREFIX}warehouse": self.warehouse}

    def describe(self) -> list[str]:
        """The lines ``kappa serving`` prints."""
        offsets = ", ".join(f"p{p}={o}" for p, o in sorted(self.end_offsets.items()))
        who = "moves with the stream" if self.follows == FOLLOWS_STREAM else "the audited cut"
        state = "" if self.consistent else " - NOT CONSISTENT: its tables reflect different offsets"
        return [f"cut of {self.pipeline} ({who}, {self.basis}): offsets {offsets or 'none'}{state}",
                *(f"  {serving_view(m.table):32s} reads {m.source} v{m.version}" for m in self.members)]


def cut_from_properties(properties: dict[str, str]) -> Cut:
    members = tuple(Member(m["table"], m["source"], int(m["version"]),
                           {int(p): int(o) for p, o in m["end_offsets"].items()})
                    for m in json.loads(properties[f"{PROPERTY_PREFIX}members"]))
    return Cut(pipeline=properties[f"{PROPERTY_PREFIX}pipeline"], follows=properties[f"{PROPERTY_PREFIX}follows"],
               generation=properties[f"{PROPERTY_PREFIX}generation"], basis=properties[f"{PROPERTY_PREFIX}basis"],
               members=members, warehouse=properties.get(f"{PROPERTY_PREFIX}warehouse", ""))


def cut_view(pipeline: str) -> str:
    return f"{SERVING_SCHEMA}._cut_{pipeline}"


def serving_view(table: str) -> str:
    """``gold.merchant_revenue`` is served as ``serving.merchant_revenue``."""
    return f"{SERVING_SCHEMA}.{table.split('.', 1)[1]}"


def cut_view_query(cut: Cut, relations: dict[str, str], columns: dict[str, list[tuple[str, str]]]) -> str:
    """The cut view's query: one branch per member, filling that member's columns, and the cut's own row.

    ``relations`` maps each member's source table to SQL reading it at the member's version (a batch snapshot's
    ``delta.`path` VERSION AS OF 7``, or a stream table's view of the store at that version), ``columns`` each
    member's table name to its columns and their Spark SQL types."""
    def items(branch: str, cut_value: str) -> str:
        filled = [(f"`{column}`" if name == branch else f"CAST(NULL AS {kind})") + f" AS `{name}__{column}`"
                  for name in (m.name for m in cut.members) for column, kind in columns[name]]
        return ", ".join([f"'{branch}' AS {BRANCH_COLUMN}", *filled, f"{cut_value} AS {CUT_COLUMN}"])

    described = json.dumps({"pipeline": cut.pipeline, "follows": cut.follows, "generation": cut.generation,
                            "basis": cut.basis, "members": json.loads(cut.members_json())}, sort_keys=True)
    branches = [f"SELECT {items(m.name, 'CAST(NULL AS string)')} FROM {relations[m.source]}"
                for m in cut.members]
    branches.append(f"SELECT {items(CUT_BRANCH, repr_sql(described))}")
    return " UNION ALL ".join(branches)


def table_view_query(pipeline: str, table: str, columns: list[str]) -> str:
    """``serving.<table>``'s query: its own branch of the pipeline's cut, under the table's own column names."""
    name = table.split(".", 1)[1]
    selected = ", ".join(f"`{name}__{column}` AS `{column}`" for column in columns)
    return f"SELECT {selected} FROM {cut_view(pipeline)} WHERE {BRANCH_COLUMN} = '{name}'"


def view_statements(view: str, exists: bool, query: str, properties: dict[str, str], comment: str) -> list[str]:
    """Create a view, or replace an existing one without a moment where it is missing.

    Spark's ``CREATE OR REPLACE VIEW`` drops the view and creates it again: a reader between the two finds no view.
    ``ALTER VIEW ... AS`` replaces the query in one metastore update; the properties follow in a second one (only
    the lock holders read them, and they hold the lock)."""
    listed = _listed({**properties, "comment": comment})
    if not exists:
        return [f"CREATE VIEW {view} TBLPROPERTIES ({listed}) AS {query}"]
    return [f"ALTER VIEW {view} AS {query}", f"ALTER VIEW {view} SET TBLPROPERTIES ({listed})"]


def typed_columns(schema) -> list[tuple[str, str]]:
    """A schema's columns with their Spark SQL types."""
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def _listed(properties: dict[str, str]) -> str:
    return ", ".join(f"'{key}' = '{sql_escaped(value)}'" for key, value in properties.items())


# ---- I/O: the catalog and the lock -----------------------------------------------------------------------

def write(spark, settings: Settings, target: Target, cut: Cut) -> dict[str, list[tuple[str, str]]]:
    """Point the pipeline's cut view at ``cut``, a cut of ``target``'s generation (one metastore update moves every
    serving view of it); returns each member's columns."""
    relations = {m.source: member_relation(spark, settings, target, m) for m in cut.members}
    columns = {m.name: typed_columns(spark.sql(f"SELECT * FROM {relations[m.source]}").schema)
               for m in cut.members}
    replace_view(spark, cut_view(cut.pipeline), cut_view_query(cut, relations, columns), cut.properties(),
                 f"one cut of {cut.pipeline}: {cut.basis}")
    return columns


def member_relation(spark, settings: Settings, target: Target, member: Member) -> str:
    """SQL reading what a member serves at its version: a stream table's view of the store, or a batch snapshot."""
    if member.source in target.stream_table_names():
        from spark_apps.io.stream_store import queries, stored_layout

        found = stored_layout(spark, settings, target, member.version)
        return f"({queries(settings, target, found, member.version)[member.source]})"
    return f"delta.`{table_path(settings, member.source)}` VERSION AS OF {member.version}"


def replace_view(spark, view: str, query: str, properties: dict[str, str], comment: str) -> None:
    """``view_statements`` on this session's catalog."""
    schema, name = view.split(".", 1)
    external = spark._jsparkSession.sharedState().externalCatalog()
    if not external.databaseExists(schema):
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    for statement in view_statements(view, external.tableExists(schema, name), query, properties, comment):
        spark.sql(statement)


def read(spark, pipeline: str) -> Cut | None:
    """The pipeline's current cut, from the catalog alone (no table is read), or None before the first."""
    external = spark._jsparkSession.sharedState().externalCatalog()
    name = cut_view(pipeline).split(".", 1)[1]
    if not external.tableExists(SERVING_SCHEMA, name):
        return None
    properties = external.getTable(SERVING_SCHEMA, name).properties()
    return cut_from_properties({key: properties.apply(key) for key in _property_keys(properties)})


def read_all(spark) -> list[Cut]:
    """Every pipeline's current cut."""
    external = spark._jsparkSession.sharedState().externalCatalog()
    if not external.databaseExists(SERVING_SCHEMA):
        return []
    names = external.listTables(SERVING_SCHEMA, "_cut_*")
    cuts = [read(spark, names.apply(i).removeprefix("_cut_")) for i in range(names.size())]
    return sorted((c for c in cuts if c is not None), key=lambda c: c.pipeline)


def _property_keys(properties) -> list[str]:
    keys, iterator = [], properties.keysIterator()
    while iterator.hasNext():
        key = iterator.next()
        if key.startswith(PROPERTY_PREFIX):
            keys.append(key)
    return keys


def locked(settings: Settings, pipeline: str, wait: bool = True) -> AbstractContextManager[bool]:
    """Hold the pipeline's serving lock; without ``wait``, yields False at once when another process holds it."""
    return file_lock(settings.run_dir / f"serving-{pipeline}.lock", wait)


def follow_stream(spark, settings: Settings, target: Target, app_id: str, batch_id: int,
                  end_offsets: dict[int, int], version: int) -> Cut | None:
    """After a micro-batch of ``target``'s stream has committed: move the cut to it (every gold table at store
    ``version``), when the cut follows this generation's stream. Returns the new cut, or None when the cut does not
    follow this stream or a dbt run holds it (the next batch moves it)."""
    def followed(cut: Cut | None) -> bool:
        return (cut is not None and cut.follows == FOLLOWS_STREAM and cut.generation == target.generation
                and cut.warehouse == str(settings.warehouse_dir))

    if not followed(read(spark, target.name)):
        return None
    with locked(settings, target.name, wait=False) as held:
        if not held:
            log.info("serving cut of %s: held (a dbt run or a serving decision); batch %d moves it later",
                     target.name, batch_id)
            return None
        current = read(spark, target.name)
        if not followed(current):
            return None
        members = tuple(Member(m.table, m.source, version, dict(end_offsets)) for m in current.members)
        cut = Cut(target.name, FOLLOWS_STREAM, target.generation, f"batch {batch_id} of {app_id}", members,
                  current.warehouse)
        write(spark, settings, target, cut)
        return cut
