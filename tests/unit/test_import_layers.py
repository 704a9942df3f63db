"""The code's imports run one way: core → pipeline/services → transforms → io → alerts/target → stream/audit → serving
→ ops → lab/orchestration → marketplace → demo → cli, with no cycle between modules, and the engine knows no pipeline.

Read from the source with ``ast``, so a function-level import counts like any other; an import under
``if TYPE_CHECKING:`` counts like any other (a type annotation is a dependency too).
"""

from __future__ import annotations

import ast
from pathlib import Path

from spark_apps.core.settings import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "spark_apps"
LAYERS = {"core": 0, "pipeline": 1, "services": 1, "transforms": 2, "io": 3, "alerts": 4, "target": 4, "stream": 5,
          "audit": 5, "serving": 6, "ops": 7, "lab": 8, "orchestration": 8, "marketplace": 9, "demo": 10,
          "cli": 11}
EXAMPLE_USERS = {"marketplace", "demo"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def room(module: str) -> str:
    """The package (or top-level module) of ``spark_apps`` a module lives in."""
    return module.split(".")[1]


def imports(path: Path) -> list[tuple[str, bool]]:
    """Every ``spark_apps`` module a file imports, and whether it runs (False under ``if TYPE_CHECKING:``)."""
    tree = ast.parse(path.read_text())
    type_only = {id(node) for branch in ast.walk(tree) if isinstance(branch, ast.If)
                 and "TYPE_CHECKING" in ast.unparse(branch.test) for node in ast.walk(branch)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("spark_apps."):
            targets = [node.module]
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                if (PROJECT_ROOT / Path(*candidate.split("."))).with_suffix(".py").exists():
                    targets.append(candidate)
            found += [(t, id(node) not in type_only) for t in targets]
        elif isinstance(node, ast.Import):
            found += [(a.name, id(node) not in type_only) for a in node.names if a.name.startswith("spark_apps.")]
    return found


def graph() -> dict[str, list[tuple[str, bool]]]:
    return {module_name(path): imports(path) for path in sorted(PACKAGE.rglob("*.py"))}


def test_every_package_has_a_layer():
    rooms = {room(module) for module in graph() if module != "spark_apps"}
    assert rooms == set(LAYERS), f"give each package a layer here and in docs/architecture.md: {rooms ^ set(LAYERS)}"


def test_imports_only_point_down_the_layers():
    upward = [f"{module} imports {target}"
              for module, targets in graph().items() if module != "spark_apps"
              for target, _ in targets
              if room(target) != room(module) and LAYERS[room(target)] >= LAYERS[room(module)]]
    assert not upward, "\n".join(upward)


def test_nothing_outside_the_example_and_the_demo_imports_the_example_pipeline():
    users = [f"{module} imports {target}" for module, targets in graph().items() if module != "spark_apps"
             for target, _ in targets if room(target) == "marketplace" and room(module) not in EXAMPLE_USERS]
    assert not users, "\n".join(users)


def test_no_module_import_cycle_even_through_type_annotations():
    """A type two modules share lives in a module of its own, so neither imports the other, not even for an
    annotation under ``if TYPE_CHECKING:``."""
    edges = {module: sorted({t for t, _ in targets if t in graph_modules and t != module})
             for graph_modules in [set(graph())] for module, targets in graph().items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for target in edges.get(module, []):
            if state.get(target) == 1:
                cycles.append(trail[trail.index(target):] + [target])
            elif target not in state:
                visit(target, trail + [target])
        state[module] = 2

    for module in edges:
        if module not in state:
            visit(module, [module])
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_the_walk_sees_function_level_imports():
    """A guard on the guard: the stream's lazy imports are in the graph, so an upward one would be caught."""
    cli = dict(graph())["spark_apps.cli"]
    assert ("spark_apps.stream.job", True) in cli
