"""Every alert links a section of docs/runbook.md that exists: a page must never point on-call at nothing."""

import re

from spark_apps.core.settings import PROJECT_ROOT
from spark_apps.ops.supervisor import _SUMMARIES

RUNBOOK = (PROJECT_ROOT / "docs" / "runbook.md").read_text()


def anchors_linked_by_the_code() -> set[str]:
    code = "\n".join(p.read_text() for p in (PROJECT_ROOT / "spark_apps").rglob("*.py"))
    static = set(re.findall(r'runbook\("([a-z-]+)"\)', code))
    supervisor = {f"stream-{status}" for status in _SUMMARIES if status != "started"}  # started links stream-down
    return static | supervisor


def test_every_anchor_an_alert_links_is_a_section_of_the_runbook():
    sections = set(re.findall(r"^## ([a-z-]+)$", RUNBOOK, re.M))
    missing = anchors_linked_by_the_code() - sections
    assert not missing, f"alerts link runbook sections that do not exist: {sorted(missing)}"
    assert len(anchors_linked_by_the_code()) >= 10
