"""Which code a pipeline is: the engine's version with the pipeline's own modules hashed in, so the ledger can say
whether the stream and the batch that audits it ran the same code (a user's module is outside the engine's
checkout, and its edits are no git commit of the engine)."""

from __future__ import annotations

import dataclasses
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from spark_apps.core.version import code_version
from spark_apps.pipeline.declaration import Pipeline


def pipeline_version(pipeline: Pipeline) -> str:
    """The code version of everything that computes ``pipeline``'s tables in this process."""
    return code_version(own_files(pipeline))


def own_files(pipeline: Pipeline) -> list[Path]:
    """The files of the modules that define the pipeline's functions, and of every loaded module beside them (the
    helpers of a pipeline's package), leaving out the standard library and installed packages."""
    installed = {Path(sysconfig.get_paths()[key]).resolve() for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    folders = set()
    for function in _functions(pipeline):
        path = _file_of(sys.modules.get(getattr(function, "__module__", None) or ""))
        if path is not None and not any(path.is_relative_to(root) for root in installed):
            folders.add(path.parent)
    loaded = (_file_of(module) for module in list(sys.modules.values()))
    return sorted({path for path in loaded if path is not None and path.parent in folders})


def _functions(pipeline: Pipeline) -> Iterator[object]:
    for declared in (pipeline, pipeline.schema, *pipeline.gold_tables):
        for field in dataclasses.fields(declared):
            value = getattr(declared, field.name, None)
            if callable(value):
                yield value


def _file_of(module) -> Path | None:
    file = getattr(module, "__file__", None)
    return Path(file).resolve() if file and file.endswith(".py") else None
