"""A code version is a hash of what ran: the engine, and a pipeline's own modules outside it."""

from __future__ import annotations

import importlib
import uuid

from spark_apps.core.version import code_version, content_of, engine_files, git_commit, same_code
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.pipeline.provenance import own_files, pipeline_version


def test_the_version_is_a_content_hash_with_the_git_commit_beside_it():
    version = code_version()
    digest, *rest = version.split()
    assert len(digest) == 16 and int(digest, 16) >= 0
    assert rest == (["git", git_commit()] if git_commit() else [])
    assert code_version() == version, "the same files hash the same"


def test_two_versions_are_the_same_code_when_their_hashes_agree_whatever_git_says():
    assert same_code("3fa9c2d18e0b7a51 git 1a2b3c4d5e6f", "3fa9c2d18e0b7a51 git 99aa88bb77cc-dirty")
    assert not same_code("3fa9c2d18e0b7a51 git 1a2b3c4d5e6f", "0000c2d18e0b7a51 git 1a2b3c4d5e6f")
    assert not same_code("", "") and not same_code("", "3fa9c2d18e0b7a51")
    assert content_of("1a2b3c4d5e6f-dirty") == "1a2b3c4d5e6f-dirty", "a version recorded before hashes"


def test_a_pipeline_inside_the_engine_is_the_engine_s_version():
    assert set(own_files(PIPELINE)) <= set(engine_files())
    assert pipeline_version(PIPELINE) == code_version()


def test_a_user_module_and_its_loaded_helpers_are_hashed_in_and_an_edit_changes_the_version(tmp_path, monkeypatch):
    name = f"user_pipeline_{uuid.uuid4().hex[:8]}"
    helper = f"user_helpers_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{helper}.py").write_text("def rows(frame, settings):\n    return frame\n")
    (tmp_path / f"{name}.py").write_text(
        "import dataclasses\n"
        "from spark_apps.marketplace.pipeline import PIPELINE as BASE\n"
        f"from {helper} import rows\n"
        "GOLD = dataclasses.replace(BASE.gold_tables[0], key_rows=rows)\n"
        "PIPELINE = dataclasses.replace(BASE, name='user', gold_tables=(GOLD,))\n")
    (tmp_path / "unrelated.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    pipeline = importlib.import_module(name).PIPELINE
    outside = [p.name for p in own_files(pipeline) if p not in engine_files()]
    assert outside == sorted([f"{name}.py", f"{helper}.py"]), \
        "the helper that defines a function and the module beside it that was loaded; not a file never imported"
    before = pipeline_version(pipeline)
    assert not same_code(before, code_version()), "the user's modules are part of the version"
    (tmp_path / f"{helper}.py").write_text("def rows(frame, settings):\n    return frame.distinct()\n")
    assert not same_code(pipeline_version(pipeline), before)
