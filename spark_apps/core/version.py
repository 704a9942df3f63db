"""Which code produced a table: recorded with every batch snapshot and ledger row."""

from __future__ import annotations

import subprocess
from functools import cache
from importlib.metadata import PackageNotFoundError, version

from spark_apps.core.settings import PROJECT_ROOT


@cache
def code_version() -> str:
    """The git commit of the checkout (``-dirty`` when it has local changes), else the package version."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=PROJECT_ROOT,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
        return f"{commit}-dirty" if dirty else commit
    except (OSError, subprocess.SubprocessError):
        try:
            return f"kappa-audit {version('kappa-audit')}"
        except PackageNotFoundError:
            return "unknown"
