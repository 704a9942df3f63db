"""How a pipeline is declared. A user's pipeline imports what it needs from this package, as the docs show
(``from spark_apps.pipeline import Pipeline, GoldTable, EventSchema, FieldSpec``): the modules behind these names
may move, these names stay. Each is imported when first asked for, so importing the package (the DAGs and the
alert notifier do, through its modules) loads nothing else."""

from importlib import import_module

_PUBLIC = {
    "Pipeline": "declaration", "GoldTable": "declaration", "Fold": "declaration", "Sessions": "declaration",
    "Windows": "declaration", "TableNames": "declaration", "load_pipeline": "declaration",
    "EventSchema": "event_schema", "FieldSpec": "event_schema",
    "Lateness": "lateness", "APPEND_TIME": "lateness", "HIGH_WATER_MARK": "lateness",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
