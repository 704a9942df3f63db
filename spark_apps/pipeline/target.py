"""What a command acts on: one pipeline at one generation, and everything named after them.

The value lives this low so that every layer, the Delta readers and writers of ``io`` included, takes it whole
instead of a pipeline and a generation passed side by side. Which generation is active is recorded state, read
where a command starts (``target.resolution``); this module reads nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_apps.core.object_path import Location
from spark_apps.pipeline.declaration import Pipeline, TableNames
from spark_apps.pipeline.lateness import LatenessRule

# The unsuffixed generation every pipeline starts with.
BASE = ""


def display(generation: str) -> str:
    """How messages name a generation: the unsuffixed base one has no name of its own."""
    return generation or "base"


@dataclass(frozen=True)
class Target:
    """One pipeline at one generation, and everything named after them."""

    spec: str
    pipeline: Pipeline
    generation: str
    topic: str
    checkpoint: Location
    lateness: LatenessRule

    @property
    def name(self) -> str:
        return self.pipeline.name

    @property
    def tables(self) -> TableNames:
        return self.pipeline.tables(self.generation)

    def stream_table_names(self, commit_log: bool = True) -> list[str]:
        """Every table the stream keeps at this generation (``Pipeline.stream_table_names``)."""
        return self.pipeline.stream_table_names(self.generation, commit_log)

    def describe(self) -> str:
        """How messages name it: the pipeline, and the generation when it is not the base one."""
        return self.name if self.generation == BASE else f"{self.name} generation {display(self.generation)}"
