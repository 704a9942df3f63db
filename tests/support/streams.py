"""Helpers for tests that run the stream: a fresh topic and warehouse, the hard cases, a run."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from spark_apps.core.settings import Settings
from spark_apps.io.producer import produce
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.pipeline.synthetic import GeneratorRequest, Manifest
from spark_apps.stream.job import StreamJob

# Crash points of the shared restarted stream: every stage of foreachBatch, in different batches.
FAULTS = (("after_bronze", 0), ("after_candidates", 0), ("after_silver", 1), ("after_gold", 1),
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
                                   gx_dir=home / "gx", max_offsets_per_trigger=max_offsets)


def produce_hard_cases(settings: Settings, total: int = 3000, seed: int = 3) -> tuple[Manifest, dict]:
    """The marketplace generator's hard cases (through the pipeline's generator hook), and their bytes by seq."""
    request = GeneratorRequest(seed=seed, events=total, base_time_ms=int(time.time()) * 1000,
                               allowed_lateness_s=settings.allowed_lateness_s, hard_cases=True)
    result = produce(settings, PIPELINE, request, show_progress=False)
    values = {r.seq: r.value for r in PIPELINE.generator(request)}
    return result.manifest, values


def run_stream(spark, settings: Settings, fault: str = "") -> StreamJob:
    job = StreamJob(spark, settings.with_overrides(fault_inject=fault), PIPELINE)
    job.run(until_caught_up=True)
    return job


def read_stream_table(spark, settings: Settings, name: str, pipeline=PIPELINE):
    """A stream table of this warehouse, read by its folder (the catalog's name may point at another test's
    warehouse); a derived one (a view) computed from this warehouse's tables as its view defines it."""
    from spark_apps.io.catalog import table_path
    from spark_apps.transforms.events import as_defined

    def read(table: str):
        return spark.read.format("delta").load(str(table_path(settings, table)))

    generation = name.rsplit("__", 1)[1] if "__" in name else ""
    return as_defined(name, pipeline.tables(generation), read, pipeline.schema.id_field)
