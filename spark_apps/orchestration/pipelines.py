"""Which pipelines one Airflow deployment runs, found the way a DAG file may: without importing them.

A DAG file is parsed over and over by the DAG processor, so discovery reads only the entry-point group
(``kappa.pipelines``, the names installed packages register) and the settings (``KAPPA_PIPELINE``, which may
name a ``module:attribute`` pipeline). A pipeline's own module, and pyspark with it, is imported only by the
child command a task runs, which gets the pipeline as ``--pipeline``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from spark_apps.core.errors import PlatformError
from spark_apps.pipeline.declaration import registered_pipelines


@dataclass(frozen=True, order=True)
class OrchestratedPipeline:
    """``name`` goes into DAG ids and Asset URIs; ``spec`` is what the platform's commands get as ``--pipeline``."""

    name: str
    spec: str

    def dag_id(self, job: str) -> str:
        return f"kappa_{self.name}_{job}"


def orchestrated_pipelines(settings) -> list[OrchestratedPipeline]:
    """Every registered pipeline, plus the settings' pipeline when it is not one of them: a ``module:attribute``
    one is named after its module (``my_pipeline:PIPELINE`` -> ``my_pipeline``)."""
    found = {name: OrchestratedPipeline(name, name) for name in registered_pipelines()}
    spec = settings.pipeline
    if spec not in found:
        name = orchestrated_name(spec)
        if name in found:
            raise PlatformError(f"KAPPA_PIPELINE={spec} would get the DAGs of the registered pipeline {name!r}; "
                                f"register it under a name of its own, or rename its module")
        found[name] = OrchestratedPipeline(name, spec)
    return sorted(found.values())


def orchestrated_name(spec: str) -> str:
    """The name a pipeline's DAGs go by: a registered pipeline's own, a ``module:attribute`` one's module's
    (``my_pipeline:PIPELINE`` -> ``my_pipeline``); read from the spec alone, as DAG files may not import it."""
    return dag_name(spec if ":" not in spec else spec.partition(":")[0].rpartition(".")[2])


def dag_name(text: str) -> str:
    """``text`` with every character a DAG id may not hold replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9_]", "_", text)
