"""The engine knows no pipeline: only the example pipeline itself (and the demo that shows it) imports it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import spark_apps

PACKAGE = Path(spark_apps.__file__).parent
EXAMPLE = "spark_apps.marketplace"
ALLOWED = (PACKAGE / "marketplace", PACKAGE / "demo.py")


def imported_modules(source: str, package: str) -> set[str]:
    """Every module (and imported name) a module of ``package`` imports, absolute or relative, at any depth."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = parts[: len(parts) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def imports_the_example(source: str, package: str) -> bool:
    return any(name == EXAMPLE or name.startswith(EXAMPLE + ".") for name in imported_modules(source, package))


def package_of(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])


def test_no_engine_module_imports_the_example_pipeline():
    engine = [path for path in sorted(PACKAGE.rglob("*.py"))
              if not any(path == allowed or allowed in path.parents for allowed in ALLOWED)]
    assert len(engine) > 40, "the walk must see the engine's modules"
    offenders = [str(path.relative_to(PACKAGE.parent)) for path in engine
                 if imports_the_example(path.read_text(), package_of(path))]
    assert offenders == [], f"engine modules that import {EXAMPLE}: {offenders}"


@pytest.mark.parametrize("source", [
    "import spark_apps.marketplace.pipeline",
    "from spark_apps.marketplace import pipeline",
    "def f():\n    from spark_apps.marketplace.events import SCHEMA",
    "from ..marketplace.generator import generate",
    "from .. import marketplace",
])
def test_every_form_of_import_of_the_example_is_seen(source):
    assert imports_the_example(source, "spark_apps.lab")


def test_loading_a_pipeline_by_name_is_no_import_of_it():
    assert not imports_the_example("from spark_apps.pipeline.declaration import load_pipeline\n"
                                   "PIPELINE = load_pipeline('marketplace')", "spark_apps.lab")
