"""`kappa report` writes a pipeline's overview from what the warehouse recorded, and a real headless browser draws
every plot of it without logging an error."""

from __future__ import annotations

import pytest

from spark_apps.cli import main
from spark_apps.services.browser import view
from tests.support.pages import drawn, plots

pytestmark = pytest.mark.integration


def test_kappa_report_writes_the_overview_a_browser_draws_and_a_screenshot_of_it(
        restarted_stream, audited, monkeypatch, capsys, tmp_path):
    settings = restarted_stream.job.settings
    for key, value in settings.as_env().items():
        monkeypatch.setenv(key, value)
    picture = tmp_path / "overview.png"
    assert main(["report", "--pipeline", "marketplace", "--screenshot", str(picture)]) == 0
    out = capsys.readouterr().out.splitlines()
    page = settings.reports_dir / "overview" / "marketplace.html"
    assert out == [f"overview: {page}", f"screenshot: {picture}"]
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 20_000

    shown = plots(page, settings.browser)
    assert shown.errors == [], shown.errors
    assert {"verdicts", "rows", "audits", "latency", "lag"} <= drawn(shown), shown.probe
    assert "last reconciliation " in page.read_text() and "Latest reconciliation report" in page.read_text()


def test_the_browser_reports_what_a_broken_page_logged(settings, tmp_path):
    broken = tmp_path / "broken.html"
    broken.write_text('<!doctype html><html><body><script>console.error("drawn wrong")</script>'
                      '<img src="missing.png"></body></html>')
    shown = view(broken, "document.body.children.length", settings.browser)
    assert shown.probe == 2
    assert any("drawn wrong" in e for e in shown.errors) and any("missing.png" in e for e in shown.errors), \
        shown.errors
