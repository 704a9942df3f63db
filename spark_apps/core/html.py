"""The small kit every self-contained HTML page of the platform is built from (no assets, inline SVG).

The reconciliation report, the chaos report and the benchmark page share one look: escaping, the
PASS/FAIL marks, the page frame and two charts.
"""

from __future__ import annotations

import html

COLOURS = ("#1f6feb", "#d97706", "#17803d", "#8250df", "#b42318", "#0e7490")
GOOD, BAD = "#17803d", "#b42318"
STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}.ok{color:#17803d;font-weight:600}.bad{color:#b42318;font-weight:600}
pre{background:#f8f8f8;padding:.5rem;overflow-x:auto;font-size:.8rem}ul{font-size:.85rem}h2{margin-top:1.6em}
.note{color:#555}
"""
BAR_HEIGHT, LABEL_WIDTH, CHART_WIDTH = 22, 230, 520


def escape(value: object) -> str:
    return html.escape(str(value))


def mark(ok: bool, good: str = "PASS", bad: str = "FAIL") -> str:
    return f'<span class="{"ok" if ok else "bad"}">{good if ok else bad}</span>'


def link(url: str, text: str) -> str:
    return f'<a href="{escape(url)}">{escape(text)}</a>' if url else ""


def page(title: str, body: str) -> str:
    """A whole page: the shared style, a title, and the body's HTML as given."""
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{STYLE}</style></head><body>{body}</body></html>\n")


def hbars(rows: list[tuple[str, float, str]], colour: str = COLOURS[0], colours: list[str] | None = None) -> str:
    """Horizontal bars, one per ``(label, value, caption)``, scaled to the largest value; ``colours`` per row."""
    if not rows:
        return "<p>not measured in this run</p>"
    largest = max(value for _, value, _ in rows) or 1
    parts = []
    for i, (label, value, caption) in enumerate(rows):
        y = i * BAR_HEIGHT
        width = max(1, int(CHART_WIDTH * value / largest))
        fill = colours[i] if colours else colour
        parts.append(f'<text x="0" y="{y + 15}" font-size="12">{escape(label)}</text>'
                     f'<rect x="{LABEL_WIDTH}" y="{y + 3}" width="{width}" height="{BAR_HEIGHT - 6}" fill="{fill}"/>'
                     f'<text x="{LABEL_WIDTH + width + 5}" y="{y + 15}" font-size="12">{escape(caption)}</text>')
    return (f'<svg width="{LABEL_WIDTH + CHART_WIDTH + 220}" height="{len(rows) * BAR_HEIGHT + 4}">'
            f'{"".join(parts)}</svg>')


def scatter(series: dict[str, list[tuple[float, float]]], x_label: str, y_label: str) -> str:
    """Points of several series on shared axes starting at zero, one colour per series, with a legend."""
    points = [p for values in series.values() for p in values]
    if not points:
        return "<p>not measured in this run</p>"
    width, height, left, bottom = CHART_WIDTH + 100, 260, 60, 30
    x_max = max(x for x, _ in points) or 1
    y_max = max(y for _, y in points) or 1
    parts = [f'<line x1="{left}" y1="{height - bottom}" x2="{width}" y2="{height - bottom}" stroke="#888"/>',
             f'<line x1="{left}" y1="0" x2="{left}" y2="{height - bottom}" stroke="#888"/>',
             f'<text x="{left}" y="{height - 8}" font-size="11">0</text>',
             f'<text x="{width - 120}" y="{height - 8}" font-size="11">{escape(x_label)}: {x_max:,.0f}</text>',
             f'<text x="0" y="12" font-size="11">{escape(y_label)}: {y_max:,.1f}</text>']
    for i, (name, values) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        parts.append(f'<text x="{left + 10}" y="{14 + 14 * i}" font-size="11" fill="{colour}">{escape(name)}</text>')
        for x, y in values:
            cx = left + (width - left - 10) * x / x_max
            cy = (height - bottom) - (height - bottom - 20) * y / y_max
            parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3" fill="{colour}">'
                         f'<title>{escape(name)}: {x:,.0f}, {y:,.2f}</title></circle>')
    return f'<svg width="{width + 10}" height="{height}">{"".join(parts)}</svg>'
