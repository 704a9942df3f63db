"""A user's pipeline module imports its API from ``spark_apps.pipeline``, whatever module holds each name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import spark_apps.pipeline as api
from spark_apps.pipeline import declaration, event_schema, lateness


def test_every_name_a_pipeline_declares_with_imports_from_the_package():
    from spark_apps.pipeline import (  # noqa: F401 - the import is the test
        HIGH_WATER_MARK,
        EventSchema,
        FieldSpec,
        Fold,
        GoldTable,
        Lateness,
        Pipeline,
        Sessions,
        Windows,
    )

    assert (Pipeline, GoldTable, EventSchema, Lateness) == (
        declaration.Pipeline, declaration.GoldTable, event_schema.EventSchema, lateness.Lateness)
    assert set(api.__all__) <= set(dir(api))


def test_a_name_the_package_does_not_offer_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Pipline'"):
        api.Pipline  # noqa: B018 - the lookup is the test


def test_importing_the_package_loads_none_of_its_modules_or_pyspark():
    code = ("import sys, spark_apps.pipeline; "
            "print(sorted(m for m in sys.modules if m.startswith(('spark_apps.pipeline.', 'pyspark'))))")
    root = Path(api.__file__).parents[2]
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=root).stdout
    assert loaded.strip() == "[]"
