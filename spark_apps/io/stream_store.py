"""The stream's store on disk and in the catalog: the one Delta table a pipeline generation's stream writes, every
view of it by name, and any view read at a version.

``transforms.store`` says what the store holds and how each view derives from it; this module creates the table,
registers the views in the shared catalog and reads them: at the latest version by name, or at the version an
audit or a serving cut pins (``VERSION AS OF``), through the same SQL.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from spark_apps.core.settings import Settings
from spark_apps.io import delta_log
from spark_apps.io.catalog import delta_relation, ensure_table, ensure_view, repr_sql, table_path
from spark_apps.io.catalog_locks import table_write
from spark_apps.pipeline.declaration import Fold, Pipeline
from spark_apps.pipeline.folds import BATCH, EMPTY, RESET
from spark_apps.pipeline.target import Target
from spark_apps.transforms.store import (
    COMMIT_COLUMNS,
    EPOCH,
    KIND,
    LATE,
    WINNER,
    commit_column,
    gold_column,
    record_columns,
    view_queries,
)

# Delta writes a checkpoint of the table's state inside every commit whose version is a multiple of this: a state
# rebuilt from all the store's files, several Spark jobs that double that micro-batch. The stream never reads the
# state back, so the interval only sets how many commit files a reader replays (at most this many).
CHECKPOINT_INTERVAL = 100
STORE_PROPERTIES = {"delta.checkpointInterval": str(CHECKPOINT_INTERVAL)}
STATS_COLUMNS = "delta.dataSkippingStatsColumns"

# The store keeps the folds its rows were written for, as the comment of its ``_kind`` column: a view read at a
# version folds that version's rows with the folds of that version, so a generation built by other code (a replay
# being rolled back, a fold's output changed since) reads as its own code wrote it.
FOLDS = "comment"


@dataclass(frozen=True)
class StoreLayout:
    """The store's schema, each gold table's stored columns (its partial columns when it folds), and the fold of
    each gold table that folds, as ``{"merge": [...], "output": [...]}``."""

    schema: object  # pyspark StructType
    gold_columns: dict[str, list[str]]
    folds: dict[str, dict[str, list[str]]]


def stats_columns(pipeline: Pipeline, found: StoreLayout) -> list[str]:
    """The store's columns Delta keeps statistics of in each file's log entry: those a read skips files by (a
    record's coordinates, id and time and the event fields gold keys are made of; each gold table's primary keys)
    and the batch (compaction reads each file's newest from the log). Delta would otherwise keep them of the first
    32 columns, and its writer computes them per row through a projection whose cost grows with the square of their
    number when it runs interpreted, as a micro-batch does: a quarter of a 2,000-record batch's task time (a JFR
    profile, docs/scaling.md)."""
    schema = pipeline.schema
    keys = {k for gold in pipeline.gold_tables for k in gold.primary_keys}
    wanted = {BATCH, "partition", "offset", schema.id_field, schema.time_field, *keys}
    wanted |= {gold_column(gold.name, k) for gold in pipeline.gold_tables for k in gold.primary_keys
               if k in found.gold_columns[gold.name]}
    return [f.name for f in found.schema.fields if f.name in wanted]


def declared_folds(pipeline: Pipeline) -> dict[str, dict[str, list[str]]]:
    return {g.name: {"merge": list(g.fold.merge), "output": list(g.fold.output)}
            for g in pipeline.gold_tables if g.fold is not None}


def as_stored(pipeline: Pipeline, found: StoreLayout) -> Pipeline:
    """The pipeline whose gold tables fold as the store says its rows were written to."""
    def stored(gold):
        fold = found.folds.get(gold.name)
        return dataclasses.replace(gold, fold=Fold(tuple(fold["merge"]), tuple(fold["output"])) if fold else None)

    return dataclasses.replace(pipeline, gold_tables=tuple(stored(g) for g in pipeline.gold_tables))


def store_path(settings: Settings, target: Target) -> str:
    return str(table_path(settings, target.tables.store))


def layout(spark, settings: Settings, pipeline: Pipeline) -> StoreLayout:
    """The store's columns, built from what the transforms give on no rows: every record column, every gold table's
    stored columns (prefixed), the commit row's, and the kind, batch and reset columns."""
    from pyspark.sql.types import (
        BooleanType,
        IntegerType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
    )

    from spark_apps.transforms.events import lateness_flag, with_high_water
    from spark_apps.transforms.parsing import REASON_COLUMN, candidate_rows, parse_records

    schema, rule = pipeline.schema, pipeline.lateness_rule(settings)
    raw = spark.createDataFrame([], "key binary, value binary, topic string, partition int, offset long, "
                                    "timestamp timestamp, timestampType int")
    from pyspark.sql import functions as F

    parsed = with_high_water(parse_records(raw, schema), schema.time_field, rule)
    records = (parsed.withColumn(LATE, F.when(F.col(REASON_COLUMN).isNull(), lateness_flag(schema.time_field, rule)))
               .withColumn(WINNER, F.lit(None).cast("boolean")))
    fields = {f.name: f for f in records.schema.fields}
    on_time = candidate_rows(parsed, schema).withColumn(LATE, F.lit(False))
    gold_columns, gold_fields = {}, []
    for gold in pipeline.gold_tables:
        stored = gold.compute(gold.key_rows(on_time, settings), settings).schema
        gold_columns[gold.name] = [f.name for f in stored.fields]
        gold_fields += [StructField(gold_column(gold.name, f.name), f.dataType) for f in stored.fields]
    offsets = MapType(IntegerType(), LongType())
    commit_types = {"pipeline": StringType(), "app_id": StringType(), "topic": StringType(),
                    "start_offsets": offsets, "end_offsets": offsets, "records": LongType(),
                    "dead_letters": LongType(), "duration_ms": LongType()}
    columns = [StructField(BATCH, LongType()),
               *[StructField(name, fields[name].dataType) for name in record_columns(pipeline, rule)],
               *[StructField(commit_column(c), commit_types[c]) for c in COMMIT_COLUMNS],
               *gold_fields,
               StructField(RESET, BooleanType()), StructField(EMPTY, BooleanType()),
               StructField(KIND, StringType(), metadata={FOLDS: _folds_text(declared_folds(pipeline))}),
               StructField(EPOCH, LongType())]
    return StoreLayout(StructType(columns), gold_columns, declared_folds(pipeline))


def _folds_text(folds: dict) -> str:
    return json.dumps(folds, sort_keys=True)


def layout_of(pipeline: Pipeline, schema) -> StoreLayout:
    """What a store holds, from its schema: each gold table's stored columns and the folds it was written for."""
    names = [f.name for f in schema.fields]
    columns = {gold.name: [n.split("__", 1)[1] for n in names if n.startswith(f"{gold.name}__")]
               for gold in pipeline.gold_tables}
    return StoreLayout(schema, columns, json.loads(schema[KIND].metadata.get(FOLDS) or "{}"))


def ensure_store(spark, settings: Settings, target: Target) -> StoreLayout:
    """Create the store (empty, partitioned by kind and epoch) unless it exists, record the folds the pipeline
    declares now when they changed (a commit of metadata only: earlier versions keep theirs), and point every view
    at it. Returns the layout the store now has."""
    found = layout(spark, settings, target.pipeline)
    tables = target.tables
    ensure_table(spark, settings, tables.store, found.schema, partition_by=(KIND, EPOCH),
                 properties={**STORE_PROPERTIES, STATS_COLUMNS: ",".join(stats_columns(target.pipeline, found))})
    stored = stored_layout(spark, settings, target)
    if stored.folds != found.folds:
        with table_write(spark, settings, table_path(settings, tables.store), "the store's folds"):
            spark.sql(f"ALTER TABLE {delta_relation(settings, tables.store)} ALTER COLUMN {KIND} "
                      f"COMMENT {repr_sql(_folds_text(found.folds))}")
        stored = stored_layout(spark, settings, target)
    register_views(spark, settings, target, found)
    return stored


def queries(settings: Settings, target: Target, found: StoreLayout, version: int | None = None) -> dict[str, str]:
    """Every view of the store (at ``version``) by name, as SQL, folding gold as the store says."""
    return view_queries(relation(settings, target, version), as_stored(target.pipeline, found),
                        target.pipeline.lateness_rule(settings), found.gold_columns, target.tables)


def register_views(spark, settings: Settings, target: Target, found: StoreLayout) -> list[str]:
    """Create (or point at this warehouse's store) every view of the store; returns their names."""
    named = queries(settings, target, found)
    for name, query in named.items():
        ensure_view(spark, name, query)
    return list(named)


def relation(settings: Settings, target: Target, version: int | None = None) -> str:
    """SQL naming the store, at ``version`` when given."""
    store = delta_relation(settings, target.tables.store)
    return store if version is None else f"{store} VERSION AS OF {int(version)}"


def read_view(spark, settings: Settings, target: Target, name: str, version: int | None = None,
              found: StoreLayout | None = None):
    """The view ``name`` of the store (latest, or at ``version``), by its SQL: the catalog's name is not used, so a
    read never depends on what another warehouse on the same catalog registered."""
    found = found or stored_layout(spark, settings, target, version)
    return spark.sql(queries(settings, target, found, version)[name])


def changes(spark, settings: Settings, target: Target, name: str, keys: tuple[str, ...], after: int,
            through: int):
    """The change feed of the view ``name`` over the store's versions ``(after, through]``, in the shape of Delta's
    Change Data Feed: each row of the view that a version inserted, deleted or updated, with ``_change_type``
    (``insert``, ``delete``, ``update_preimage``, ``update_postimage``) and ``_commit_version``.

    A gold table is a fold of the rows the stream appended, so Delta's own feed of the store holds partial rows, not
    the table's retractions; this compares the view at each version with the one before, row by row, a row's
    identity being ``keys`` (its primary keys). A version no micro-batch wrote (maintenance) changes no row.

    Each version is read and kept on its own before it is compared: Spark would otherwise take two scans of the
    store at different versions for one and reuse its result for both."""
    found = stored_layout(spark, settings, target, through)

    def at(version: int):
        return read_view(spark, settings, target, name, version, found).localCheckpoint(eager=True)

    before, feed = at(after), None
    for version in range(after + 1, through + 1):
        now = at(version)
        commit = _changed_rows(before.exceptAll(now), now.exceptAll(before), keys, version).localCheckpoint(eager=True)
        feed = commit if feed is None else feed.unionByName(commit)
        before = now
    return feed


def _changed_rows(gone, came, keys: tuple[str, ...], version: int):
    """One version's changes: a row gone and one come of the same key are an update, else a delete or an insert."""
    from pyspark.sql import functions as F

    def typed(rows, other, both: str, alone: str):
        condition = None
        for key in keys:
            same = F.col(f"_r.`{key}`").eqNullSafe(F.col(f"_k.`{key}`"))
            condition = same if condition is None else condition & same
        other_keys = other.select(*[F.col(f"`{key}`") for key in keys]).alias("_k")
        return (rows.alias("_r").join(other_keys, condition, "left_semi").withColumn("_change_type", F.lit(both))
                .unionByName(rows.alias("_r").join(other_keys, condition, "left_anti")
                             .withColumn("_change_type", F.lit(alone))))

    return (typed(gone, came, "update_preimage", "delete").unionByName(typed(came, gone, "update_postimage", "insert"))
            .withColumn("_commit_version", F.lit(version)))


def stored_layout(spark, settings: Settings, target: Target, version: int | None = None) -> StoreLayout:
    """What the store holds (at ``version``), from its schema."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return layout_of(target.pipeline, reader.load(store_path(settings, target)).schema)


def latest_version(settings: Settings, target: Target) -> int:
    """The store's newest version, from its log folder (no Spark job)."""
    return delta_log.latest_version(table_path(settings, target.tables.store))
