"""What a command acts on, resolved once at its edge (the CLI, a DAG task, the demo, the bench, the lab) and passed
down whole, so no layer below asks again which pipeline, which generation or which topic it means.

``KAPPA_PIPELINE`` and ``--pipeline`` give a *spec*: a registered name or ``module:attribute``. The spec is what a
process started for the pipeline is given again (the supervised stream); every file, table and alert is named after
the pipeline's ``name``.
"""

from __future__ import annotations

from spark_apps.core.paths import checkpoint_path
from spark_apps.core.settings import Settings
from spark_apps.pipeline.declaration import Pipeline, load_pipeline
from spark_apps.pipeline.target import BASE, Target
from spark_apps.target import generations
from spark_apps.target.generations import GenerationEvent


def target_of(settings: Settings, pipeline: Pipeline, generation: str = BASE, spec: str | None = None) -> Target:
    """The target of a loaded pipeline at ``generation``; ``spec`` defaults to its name (a registered pipeline)."""
    return Target(spec or pipeline.name, pipeline, generation, pipeline.source_topic(settings),
                  checkpoint_path(settings, pipeline.name, pipeline.table_prefix, generation),
                  pipeline.lateness_rule(settings))


def declared(settings: Settings, spec: str | None = None, generation: str = BASE) -> Target:
    """The pipeline of ``spec`` (default: the settings') as its code declares it, at ``generation``, read with no
    Spark session: for what names the pipeline and not one generation's tables (its topic, the supervisor's files),
    and for a replay that builds a generation it names."""
    chosen = spec or settings.pipeline
    return target_of(settings, load_pipeline(chosen), generation, chosen)


def resolve(spark, settings: Settings, spec: str | None = None) -> Target:
    """The active generation of the pipeline of ``spec`` (default: the settings'), built by the spec its replay
    recorded (e.g. new gold definitions), else by ``spec``: what ``kappa stream`` keeps and ``kappa reconcile``
    audits."""
    given = declared(settings, spec)
    return active_of(settings, given, generations.read(spark, settings, given.name))


def active_of(settings: Settings, given: Target, events: list[GenerationEvent]) -> Target:
    """``given``'s pipeline at the active generation of ``events``, with the code that builds it."""
    generation = generations.active_generation(events)
    chosen = generations.spec_for(events, generation, given.spec)
    pipeline = given.pipeline if chosen == given.spec else load_pipeline(chosen)
    return target_of(settings, pipeline, generation, chosen)
