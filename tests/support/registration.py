"""Registering a pipeline under the entry-point group the way an installed package does, for a child process."""

from __future__ import annotations

from pathlib import Path


def register_sensor_pipeline(folder: Path) -> str:
    """Write a distribution that registers the tests' sensor pipeline as ``sensors`` under ``kappa.pipelines`` into
    ``folder``; returns the folder, to put on a child's PYTHONPATH."""
    info = folder / "kappa_test_sensors-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kappa-test-sensors\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[kappa.pipelines]\nsensors = tests.support.sensor_pipeline:PIPELINE\n")
    return str(folder)
