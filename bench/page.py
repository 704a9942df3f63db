"""The HTML page of a benchmark run: the numbers of ``bench.json`` as tables and inline SVG charts."""

from __future__ import annotations

import html

LABEL_WIDTH = 230
CHART_WIDTH = 520
BAR_HEIGHT = 22
COLOURS = ("#1f6feb", "#d97706", "#17803d", "#8250df", "#b42318", "#0e7490")


def _e(value: object) -> str:
    return html.escape(str(value))


def _n(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def hbars(rows: list[tuple[str, float, str]], colour: str = COLOURS[0]) -> str:
    """Horizontal bars, one per ``(label, value, caption)``, scaled to the largest value."""
    if not rows:
        return "<p>not measured in this run</p>"
    largest = max(value for _, value, _ in rows) or 1
    parts = []
    for i, (label, value, caption) in enumerate(rows):
        y = i * BAR_HEIGHT
        width = max(1, int(CHART_WIDTH * value / largest))
        parts.append(f'<text x="0" y="{y + 15}" font-size="12">{_e(label)}</text>'
                     f'<rect x="{LABEL_WIDTH}" y="{y + 3}" width="{width}" height="{BAR_HEIGHT - 6}" fill="{colour}"/>'
                     f'<text x="{LABEL_WIDTH + width + 5}" y="{y + 15}" font-size="12">{_e(caption)}</text>')
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
             f'<text x="{width - 120}" y="{height - 8}" font-size="11">{_e(x_label)}: {x_max:,.0f}</text>',
             f'<text x="0" y="12" font-size="11">{_e(y_label)}: {y_max:,.1f}</text>']
    for i, (name, values) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        parts.append(f'<text x="{left + 10}" y="{14 + 14 * i}" font-size="11" fill="{colour}">{_e(name)}</text>')
        for x, y in values:
            cx = left + (width - left - 10) * x / x_max
            cy = (height - bottom) - (height - bottom - 20) * y / y_max
            parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3" fill="{colour}">'
                         f'<title>{_e(name)}: {x:,.0f}, {y:,.2f}</title></circle>')
    return f'<svg width="{width + 10}" height="{height}">{"".join(parts)}</svg>'


def _throughput(doc: dict) -> str:
    rows = []
    for label, key in (("Python producer", "producer"), ("raw Kafka read (Spark)", "raw_kafka_read"),
                       ("limit: plain Kafka -> Parquet", "limit"), ("platform stream (all tables)", "platform")):
        measured = doc.get(key)
        if measured:
            rows.append((label, measured["records_per_s"], f'{measured["records_per_s"]:,.0f} records/s'))
    ratio = doc.get("platform_to_limit")
    caption = f"<p>Platform / limit: <b>{ratio:.0%}</b> of the plain append's throughput.</p>" if ratio else ""
    return hbars(rows) + caption


def _latency(doc: dict) -> str:
    rows = []
    for run in doc.get("latency", []):
        for point, value in run["latency_s"].items():
            rows.append((f'{run["target_rate"]:,.0f}/s {point}', value or 0, f"{_n(value, 2)} s"))
    return hbars(rows, COLOURS[1])


def _recompute(doc: dict) -> str:
    rows = []
    for size in doc.get("sizes", []):
        audit = size.get("recompute_and_reconcile")
        if not audit:
            continue
        for phase, seconds in audit["phases_s"].items():
            rows.append((f'{size["events"]:,} events: {phase}', seconds, f"{seconds:,.1f} s"))
        rows.append((f'{size["events"]:,} events: total', audit["seconds"], f'{audit["seconds"]:,.1f} s'))
    return hbars(rows, COLOURS[2])


def _stages(doc: dict) -> str:
    stages = (doc.get("platform") or {}).get("stage_seconds", {})
    return hbars([(stage, seconds, f"{seconds:,.1f} s") for stage, seconds in stages.items()], COLOURS[3])


def _batches(doc: dict) -> str:
    batches = (doc.get("platform") or {}).get("per_batch", [])
    return scatter({"micro-batch": [(b["batch_id"], b["seconds"]) for b in batches]}, "batch id", "seconds")


def _merge(doc: dict) -> str:
    series = {table: [(p["rows_before"], p["execution_ms"] / 1000) for p in found["points"]]
              for table, found in doc.get("merge_cost", {}).items()}
    flat = ", ".join(f'{_e(t)} {_n(f["flatness"], 2)}' for t, f in doc.get("merge_cost", {}).items())
    return (scatter(series, "table rows before the MERGE", "MERGE seconds")
            + f"<p>Cost of the last third of MERGEs over the first third (1.0 = flat): {flat or '-'}</p>")


def _machine(doc: dict) -> str:
    return "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in doc.get("machine", {}).items())


def render(doc: dict) -> str:
    growth = "".join(f'<li>{g["from"]:,} -> {g["to"]:,} events: time x{g["time_ratio"]} for size x{g["size_ratio"]} '
                     f'(exponent {_n(g["exponent"], 2)}; 1.0 is linear)</li>' for g in doc.get("growth", []))
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>kappa bench {_e(doc.get("measured_at", ""))}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1000px}} th{{text-align:left;padding-right:1em}}
h2{{margin-top:1.6em}} .note{{color:#555}}</style></head><body>
<h1>Benchmark, {_e(doc.get("measured_at", ""))}</h1>
<p class="note">All numbers from one run on one machine, same records for every measurement. Load average at
start {_e(doc.get("machine", {}).get("load_at_start"))}, at end {_e(doc.get("machine", {}).get("load_at_end"))}
(anything well above 0 means something else competed for the cores).</p>
<h2>Throughput</h2>{_throughput(doc)}
<h2>Where a platform micro-batch spends its time (summed over batches)</h2>{_stages(doc)}
<h2>Platform micro-batch durations</h2>{_batches(doc)}
<h2>End to end latency, log append to visible in gold</h2>{_latency(doc)}
<h2>Batch recompute and reconciliation</h2>{_recompute(doc)}<ul>{growth}</ul>
<h2>Gold MERGE cost as the table grows</h2>{_merge(doc)}
<h2>Machine</h2><table>{_machine(doc)}</table>
</body></html>"""
