"""The reconciliation report on-call opens: one self-contained HTML page per run.

Per table: the verdict, the counts by kind, a strip of its comparison buckets (per window for gold
tables with a ``window_start``) coloured by match, a sample of differing rows, and links to the GX
Data Docs. Plain HTML and inline SVG, so it opens from a file or a CI artifact with nothing else.
"""

from __future__ import annotations

import html
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from spark_apps.audit.diff import KINDS, WINDOW_COLUMN
from spark_apps.core.paths import dbt_docs_index, latest_report_path, report_path
from spark_apps.core.settings import Settings

if TYPE_CHECKING:
    from spark_apps.audit.run import AuditRun, TableVerdict

STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;color:#222}
table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}.ok{color:#17803d;font-weight:600}.bad{color:#b42318;font-weight:600}
pre{background:#f8f8f8;padding:.5rem;overflow-x:auto;font-size:.8rem}
"""


def _e(value: object) -> str:
    return html.escape(str(value))


def _verdict(ok: bool, good: str = "MATCH", bad: str = "MISMATCH") -> str:
    return f'<span class="{"ok" if ok else "bad"}">{good if ok else bad}</span>'


def _link(url: str, text: str) -> str:
    return f'<a href="{_e(url)}">{_e(text)}</a>' if url else ""


def bucket_strip(verdict: TableVerdict, width: int = 900, height: int = 28) -> str:
    """One cell per comparison bucket, green when stream and batch agree, red when not."""
    buckets = verdict.diff.buckets
    if not buckets:
        return "<p>no rows on either side</p>"
    cell = width / len(buckets)
    cells = "".join(
        f'<rect x="{i * cell:.2f}" y="0" width="{max(cell - 0.5, 0.5):.2f}" height="{height}" '
        f'fill="{"#3fb950" if b.matches else "#f85149"}"><title>{_e(b.bucket)}: stream {b.stream_rows}, '
        f'batch {b.batch_rows}</title></rect>'
        for i, b in enumerate(buckets))
    by_window = WINDOW_COLUMN in verdict.diff.keys
    axis = (f"{len(buckets)} windows, {_e(buckets[0].bucket)} … {_e(buckets[-1].bucket)}" if by_window
            else f"{len(buckets)} key-hash buckets")
    differing = len(verdict.diff.differing_buckets)
    return (f'<svg width="{width}" height="{height}" role="img" aria-label="buckets">{cells}</svg>'
            f"<p>{axis}; {differing} differ</p>")


def _samples(verdict: TableVerdict) -> str:
    parts = []
    for kind in KINDS:
        for sample in verdict.diff.samples.get(kind, []):
            parts.append(f"<h4>{_e(kind)}: {_e(sample['key'])}</h4><pre>stream: {_e(chr(10).join(sample['stream']))}"
                         f"\nbatch:  {_e(chr(10).join(sample['batch']))}</pre>")
    return "".join(parts)


def render(run: AuditRun, dbt_docs: Path | None = None) -> str:
    p = run.position
    spans = ", ".join(f"p{k}=[{p.start_offsets.get(k, 0)},{o})" for k, o in sorted(p.end_offsets.items()))
    timing = ", ".join(f"{k} {v:.1f} s" for k, v in run.seconds.items())
    rows = "".join(
        f'<tr><td class="l">{_e(v.table.label)}</td><td>{v.version}</td><td>{v.snapshot_version}</td>'
        f"<td>{v.diff.stream_rows:,}</td><td>{v.diff.batch_rows:,}</td><td>{v.diff.matched:,}</td>"
        + "".join(f"<td>{v.diff.counts[k]:,}</td>" for k in KINDS)
        + f"<td>{len(v.diff.differing_buckets)}/{len(v.diff.buckets)}</td>"
        f'<td class="l">{_verdict(v.stream_equals_batch)} {_verdict(v.gx.quality_ok, "quality ok", "QUALITY")} '
        f'{_link(v.gx.result_url, "GX result")}</td></tr>'
        for v in run.verdicts)
    contract = "".join(f'<tr><td class="l">{_e(c.name)}</td><td>{c.left:,}</td><td>{c.right:,}</td>'
                       f'<td class="l">{_verdict(c.ok, "holds", "BROKEN")}</td></tr>' for c in run.contract)
    details = "".join(
        f"<h3>{_e(v.table.label)} (stream version {v.version})</h3>{bucket_strip(v)}"
        + (f'<p class="bad">{_e(v.diff.schema_problem)}</p>' if v.diff.schema_problem else "")
        + "<ul>" + "".join(f'<li>{_verdict(e.success, "pass", "FAIL")} {_e(e.description)} {_e(e.observed)}</li>'
                           for e in v.gx.expectations) + "</ul>"
        + _samples(v)
        for v in run.verdicts)
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>Reconciliation {_e(run.run_id)}</title>
<style>{STYLE}</style></head><body>
<h1>Reconciliation of {_e(run.pipeline)}: {_verdict(run.success, "EXACT MATCH", "FAILED")}</h1>
<p>Run {_e(run.run_id)} at {_e(f"{run.started_at:%Y-%m-%d %H:%M:%S} UTC")}; stream batch {p.batch_id} of
{_e(p.app_id)}; topic {_e(p.topic)} {_e(spans)}; {run.snapshot.records:,} records recomputed;
code {_e(run.snapshot.code_version)}.</p>
<p>Time: {_e(timing)}. {_link(run.docs_url, "Great Expectations Data Docs")}
{_link(dbt_docs.as_uri() if dbt_docs else "", "dbt docs of the marts over the serving views")}</p>
<table><tr><th class="l">table</th><th>stream version</th><th>snapshot version</th><th>stream rows</th>
<th>batch rows</th><th>matched</th>{"".join(f"<th>{k}</th>" for k in KINDS)}<th>buckets differing</th>
<th class="l">verdict</th></tr>{rows}</table>
{"<h2>Record-count contract</h2><table><tr><th class='l'>equation</th><th>left</th><th>right</th><th></th></tr>"
 + contract + "</table>" if run.contract else ""}
<h2>Per table</h2>{details}
</body></html>"""


def write_report(settings: Settings, run: AuditRun) -> Path:
    """Write the run's page and refresh ``latest.html`` beside it; link the dbt docs once they exist."""
    path = report_path(settings, run.pipeline, run.run_id)
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    dbt_docs = dbt_docs_index(settings)
    path.write_text(render(run, dbt_docs if dbt_docs.exists() else None))
    shutil.copyfile(path, latest_report_path(settings, run.pipeline))
    return path
