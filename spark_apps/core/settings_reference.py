"""docs/settings.md, generated from the ``Settings`` object: every ``KAPPA_*`` variable, its type and default.

Pure: it reads the class (fields, types, defaults, ``FIELD_DOCS``), never the environment, so the page is the
same on every machine. Regenerate with ``make docs``
(``python -m spark_apps.core.settings_reference > docs/settings.md``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import get_type_hints

from spark_apps.core.object_path import ObjectPath
from spark_apps.core.secret import Secret
from spark_apps.core.settings import FIELD_DOCS, PROJECT_ROOT, SECRET_FIELDS, Settings, _env_name

REGENERATE = ".venv/bin/python -m spark_apps.core.settings_reference > docs/settings.md"
_TYPE_NAMES = {Path: "path", Path | ObjectPath: "path or s3a:// URI", int: "integer", float: "number",
               bool: "boolean", str: "string", Secret: "secret string"}

HEADER = """# Settings

<!-- Generated from spark_apps/core/settings.py by `make docs`; do not edit by hand. -->

One typed object, `Settings` in [`spark_apps/core/settings.py`](../spark_apps/core/settings.py), configures every
app, DAG and test. Each field is overridden by an environment variable `KAPPA_<FIELD>`; Airflow tasks and child
processes see the same values. A bad value ends a command with one line on stderr naming the variable (a timeout
or interval in seconds must be a finite number above 0). A `KAPPA_*` variable that names no setting is ignored with
a warning that names the setting it most likely meant.
Paths marked `$KAPPA_HOME/...` follow `KAPPA_HOME` unless set themselves; `<repo>` is the checkout. A relative path
is taken from the working directory the command runs in, and every process it starts gets it absolute.
Booleans accept `1/0`, `true/false`, `yes/no`, `on/off`; integers may contain `_`.
Secrets show their variable only, never a value.

| variable | type | default | what |
|---|---|---|---|
"""


def _default(f: dataclasses.Field) -> str:
    if f.name in SECRET_FIELDS:
        return "secret, not shown"
    under_home = f.metadata.get("under_home")
    if under_home:
        return f"`$KAPPA_HOME/{under_home}`"
    value = f.default
    if isinstance(value, Path):
        try:
            return f"`<repo>/{value.relative_to(PROJECT_ROOT).as_posix()}`"
        except ValueError:
            return f"`{value.as_posix()}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if value == "":
        return "empty"
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def missing_docs() -> list[str]:
    """Fields without a description, and descriptions of fields that no longer exist."""
    names = {f.name for f in dataclasses.fields(Settings)}
    return sorted(names - FIELD_DOCS.keys()) + sorted(f"{n} (no such field)" for n in FIELD_DOCS.keys() - names)


def render_markdown() -> str:
    """The whole of docs/settings.md."""
    hints = get_type_hints(Settings)
    rows = []
    for f in dataclasses.fields(Settings):
        kind = _TYPE_NAMES.get(hints[f.name], str(hints[f.name]))
        rows.append(f"| `{_env_name(f.name)}` | {kind} | {_default(f)} | {_cell(FIELD_DOCS.get(f.name, ''))} |")
    return HEADER + "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(render_markdown(), end="")
