import dataclasses

from spark_apps.core.settings import PROJECT_ROOT, SECRET_FIELDS, Settings
from spark_apps.core.settings_reference import REGENERATE, missing_docs, render_markdown


def test_docs_settings_md_is_generated_from_the_settings_object():
    page = PROJECT_ROOT / "docs" / "settings.md"
    assert page.exists(), f"docs/settings.md is missing; generate it with `{REGENERATE}` (or `make docs`)"
    assert page.read_text() == render_markdown(), \
        f"docs/settings.md is stale; regenerate it with `{REGENERATE}` (or `make docs`)"


def test_every_setting_has_a_description_and_a_row():
    assert missing_docs() == [], "describe each field in FIELD_DOCS of spark_apps/core/settings.py (and drop "\
                                 f"descriptions of removed fields), then run `{REGENERATE}`"
    page = render_markdown()
    for f in dataclasses.fields(Settings):
        assert f"| `KAPPA_{f.name.upper()}` |" in page


def test_secrets_render_as_their_variable_only(monkeypatch):
    leaked = "https://hooks.example.invalid/T000/B000/very-secret"
    for name in SECRET_FIELDS:
        monkeypatch.setenv(f"KAPPA_{name.upper()}", leaked)
    page = render_markdown()
    assert leaked not in page
    for name in SECRET_FIELDS:
        row = next(line for line in page.splitlines() if line.startswith(f"| `KAPPA_{name.upper()}` |"))
        assert row.split("|")[3].strip() == "secret, not shown"


def test_the_page_names_no_machine_specific_path():
    assert str(PROJECT_ROOT) not in render_markdown()
