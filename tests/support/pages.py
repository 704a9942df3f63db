"""What a page the platform wrote looks like in a real headless browser."""

from __future__ import annotations

from pathlib import Path

from spark_apps.services.browser import PageView, view

# Per plot of the page: its id, its drawn size, and how many marks (lines, markers, bars) it holds.
PLOTS = """[...document.querySelectorAll('figure.plot')].map(figure => {
  const svg = figure.querySelector('svg'); const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  return {id: figure.id, width: Math.round(box.width), height: Math.round(box.height),
          marks: svg ? svg.querySelectorAll('path, use, rect').length : 0};
})"""


def plots(page: Path, browser: str, screenshot: Path | None = None) -> PageView:
    """Load ``page``; ``probe`` is every plot's id, size and marks, ``errors`` what the page logged."""
    return view(page, PLOTS, browser, screenshot=screenshot)


def drawn(shown: PageView) -> set[str]:
    """The plots that the browser drew with something in them."""
    return {p["id"] for p in shown.probe if p["width"] > 200 and p["height"] > 100 and p["marks"] > 10}
