"""Helpers for tests that run the stream: a fresh topic and warehouse, the hard cases, a run."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from spark_apps.core.settings import Settings
from spark_apps.io.producer import produce
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.pipeline.synthetic import GeneratorRequest, Manifest
from spark_apps.stream.job import StreamJob
from spark_apps.target.resolution import target_of

# Crash points of the shared restarted stream: every stage of foreachBatch, in different batches: after Spark
# committed the batch's state but before the store's commit, after that commit, and before Spark's own commit.
FAULTS = (("after_parse", 0), ("after_write", 0), ("after_parse", 1), ("after_write", 1),
          ("before_checkpoint_commit", 2))


@dataclass
class StreamRun:
    job: StreamJob
    manifest: Manifest
    values: dict
    failures: list[tuple[str, int, str]] = field(default_factory=list)


def fresh_stream_settings(settings: Settings, home, topic_name: str, max_offsets: int) -> Settings:
    from spark_apps.io.topics import ensure_topic

    ensure_topic(settings, topic_name)
    return settings.with_overrides(events_topic=topic_name, warehouse_dir=home / "warehouse",
                                   checkpoint_root=home / "checkpoints", reports_dir=home / "reports",
                                   gx_dir=home / "gx", max_offsets_per_trigger=max_offsets,
                                   alerts_incidents=home / "alerts" / "incidents.json")


def produce_hard_cases(settings: Settings, total: int = 3000, seed: int = 3) -> tuple[Manifest, dict]:
    """The marketplace generator's hard cases (through the pipeline's generator hook), and their bytes by seq."""
    request = GeneratorRequest(seed=seed, events=total, base_time_ms=int(time.time()) * 1000,
                               allowed_lateness_s=settings.allowed_lateness_s, hard_cases=True)
    result = produce(settings, PIPELINE, request, show_progress=False)
    values = {r.seq: r.value for r in PIPELINE.generator(request)}
    return result.manifest, values


def run_stream(spark, settings: Settings, fault: str = "") -> StreamJob:
    job = StreamJob(spark, settings.with_overrides(fault_inject=fault), target_of(settings, PIPELINE))
    job.run(until_caught_up=True)
    return job


def read_stream_table(spark, settings: Settings, name: str, pipeline=PIPELINE, version: int | None = None):
    """A stream table of this warehouse (latest, or at a version of its store), read by its view's SQL over this
    warehouse's store: the catalog's name may point at another test's warehouse."""
    from spark_apps.io.stream_store import read_view

    generation = name.rsplit("__", 1)[1] if "__" in name else ""
    return read_view(spark, settings, target_of(settings, pipeline, generation), name, version=version)



def _gold_in_store(settings: Settings, table: str, pipeline) -> tuple[str, str]:
    """The folder of the store holding the gold table ``table`` (``gold.x`` or a replay's ``gold.x__g2``), and the
    table's name in it."""
    from spark_apps.io.catalog import table_path

    generation = table.split(".", 1)[1].partition("__")[2]
    tables = pipeline.tables(generation)
    name = next(g.name for g in pipeline.gold_tables if tables.gold(g.name) == table)
    return str(table_path(settings, tables.store)), name


def add_to_gold(spark, settings: Settings, table: str, column: str, amount: int, where: dict[str, object],
                pipeline=PIPELINE) -> int:
    """A stray write: add ``amount`` to ``column`` of the rows of a gold table the store holds for the key
    ``where`` (the table's own column names). Returns the store's version before it, for ``restore_store``."""
    store, name = _gold_in_store(settings, table, pipeline)
    before = spark.sql(f"DESCRIBE HISTORY delta.`{store}` LIMIT 1").first().version
    target = f"`{name}__{column}`"
    keys = " AND ".join(f"`{name}__{k}` = '{v}'" for k, v in where.items())
    spark.sql(f"UPDATE delta.`{store}` SET {target} = {target} + {amount} WHERE _kind = 'gold.{name}' AND {keys}")
    return before


def restore_store(spark, settings: Settings, table: str, version: int, pipeline=PIPELINE) -> None:
    """Put the store holding ``table`` back at ``version``."""
    store, _ = _gold_in_store(settings, table, pipeline)
    spark.sql(f"RESTORE TABLE delta.`{store}` TO VERSION AS OF {version}")
