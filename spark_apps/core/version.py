"""Which code produced a table: recorded with every stream commit, batch snapshot and ledger row.

A code version is a content hash of what ran (the engine's modules and the pipeline's own), with the git commit
beside it when there is one: ``3fa9c2d18e0b7a51 git 1a2b3c4d5e6f-dirty``. Two runs ran the same code when the hashes
are equal, whatever git says (a change to the docs is no change of code; an uncommitted edit or a user's module
outside the checkout is).
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from spark_apps.core.settings import PROJECT_ROOT

ENGINE = PROJECT_ROOT / "spark_apps"
_HASH_CHARS = 16


def code_version(own_files: Iterable[Path] = ()) -> str:
    """The version of the engine with ``own_files`` (a pipeline's modules outside it) hashed in."""
    digest = hashlib.sha256(engine_hash().encode())
    for path in sorted({Path(p).resolve() for p in own_files} - set(engine_files())):
        digest.update(f"\0{path.name}\0".encode())
        digest.update(_read(path))
    commit = git_commit()
    return digest.hexdigest()[:_HASH_CHARS] + (f" git {commit}" if commit else "")


def same_code(one: str, other: str) -> bool:
    """Whether two recorded versions name the same code: their content hashes agree (an unknown one never does)."""
    return bool(one) and bool(other) and content_of(one) == content_of(other)


def content_of(version: str) -> str:
    """The content hash of a recorded version (the whole text of a version recorded before hashes)."""
    return version.split()[0] if version else ""


@cache
def engine_files() -> tuple[Path, ...]:
    return tuple(sorted(p.resolve() for p in ENGINE.rglob("*.py")))


@cache
def engine_hash() -> str:
    """Every module of the engine, by its path in the package and its bytes."""
    digest = hashlib.sha256()
    for path in engine_files():
        digest.update(f"\0{path.relative_to(ENGINE.resolve())}\0".encode())
        digest.update(_read(path))
    return digest.hexdigest()


@cache
def git_commit() -> str:
    """The git commit of the checkout (``-dirty`` with local changes), or "" outside one."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=PROJECT_ROOT,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return f"{commit}-dirty" if dirty else commit


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b"<unreadable>"
