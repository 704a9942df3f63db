"""The docs a newcomer reads: a README short enough for five minutes, and no link that leads nowhere."""

import re

import pytest

from spark_apps.core.settings import PROJECT_ROOT

PAGES = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md")),
         *sorted(PROJECT_ROOT.glob("*/README.md"))]
# [text](target): a relative target, without its #anchor; web links and pure anchors are not files.
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_the_readme_is_at_most_200_lines():
    assert len((PROJECT_ROOT / "README.md").read_text().splitlines()) <= 200


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(PROJECT_ROOT)))
def test_every_relative_link_of_a_page_leads_to_a_file_or_folder(page):
    targets = [t for t in LINK.findall(page.read_text()) if "://" not in t and not t.startswith("mailto:")]
    missing = [t for t in targets if not (page.parent / t).exists()]
    assert not missing, f"{page.name} links to what does not exist: {missing}"
