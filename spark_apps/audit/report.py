"""The reconciliation report on-call opens: one self-contained HTML page per run.

Per table: the verdict, the counts by kind, a strip of its comparison buckets (per window for gold
tables with a ``window_start``) coloured by match, a sample of differing rows, and links to the GX
Data Docs. Plain HTML and inline SVG, so it opens from a file or a CI artifact with nothing else.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from spark_apps.audit.diff import KINDS, WINDOW_COLUMN
from spark_apps.audit.explain import explain_command
from spark_apps.audit.verdict import AuditRun, TableVerdict
from spark_apps.core.html import escape, link, mark, page
from spark_apps.core.paths import dbt_docs_index, latest_report_path, overview_path, report_path
from spark_apps.core.settings import Settings


def bucket_strip(verdict: TableVerdict, width: int = 900, height: int = 28) -> str:
    """One cell per comparison bucket, green when stream and batch agree, red when not."""
    buckets = verdict.diff.buckets
    if not buckets:
        return "<p>no rows on either side</p>"
    cell = width / len(buckets)
    cells = "".join(
        f'<rect x="{i * cell:.2f}" y="0" width="{max(cell - 0.5, 0.5):.2f}" height="{height}" '
        f'fill="{"#3fb950" if b.matches else "#f85149"}"><title>{escape(b.bucket)}: stream {b.stream_rows}, '
        f'batch {b.batch_rows}</title></rect>'
        for i, b in enumerate(buckets))
    by_window = WINDOW_COLUMN in verdict.diff.keys
    axis = (f"{len(buckets)} windows, {escape(buckets[0].bucket)} … {escape(buckets[-1].bucket)}" if by_window
            else f"{len(buckets)} key-hash buckets")
    differing = len(verdict.diff.differing_buckets)
    return (f'<svg width="{width}" height="{height}" role="img" aria-label="buckets">{cells}</svg>'
            f"<p>{axis}; {differing} differ</p>")


def _samples(pipeline: str, verdict: TableVerdict) -> str:
    """Each sample key with both sides' rows and, for a gold table, the command that traces it to the log."""
    parts = []
    gold = verdict.table.label.startswith("gold.")
    for kind in KINDS:
        for sample in verdict.diff.samples.get(kind, []):
            command = explain_command(pipeline, verdict.table.label, sample["key"])
            trace = f'<p class="note">trace it: <code>{escape(command)}</code></p>' if gold else ""
            parts.append(f"<h4>{escape(kind)}: {escape(sample['key'])}</h4>"
                         f"<pre>stream: {escape(chr(10).join(sample['stream']))}"
                         f"\nbatch:  {escape(chr(10).join(sample['batch']))}</pre>{trace}")
    return "".join(parts)


def render(run: AuditRun, dbt_docs: Path | None = None, overview: Path | None = None) -> str:
    p = run.position
    spans = ", ".join(f"p{k}=[{p.start_offsets.get(k, 0)},{o})" for k, o in sorted(p.end_offsets.items()))
    timing = ", ".join(f"{k} {v:.1f} s" for k, v in run.seconds.items())
    rows = "".join(
        f'<tr><td class="l">{escape(v.table.label)}</td><td>{v.version}</td><td>{v.snapshot_version}</td>'
        f"<td>{v.diff.stream_rows:,}</td><td>{v.diff.batch_rows:,}</td><td>{v.diff.matched:,}</td>"
        + "".join(f"<td>{v.diff.counts[k]:,}</td>" for k in KINDS)
        + f"<td>{len(v.diff.differing_buckets)}/{len(v.diff.buckets)}</td>"
        f'<td class="l">{mark(v.stream_equals_batch, "MATCH", "MISMATCH")} '
        f'{mark(v.gx.quality_ok, "quality ok", "QUALITY")} '
        f'{link(v.gx.result_url, "GX result")}</td></tr>'
        for v in run.verdicts)
    contract = "".join(f'<tr><td class="l">{escape(c.name)}</td><td>{c.left:,}</td><td>{c.right:,}</td>'
                       f'<td class="l">{mark(c.ok, "holds", "BROKEN")}</td></tr>' for c in run.contract)
    details = "".join(
        f"<h3>{escape(v.table.label)} (stream version {v.version})</h3>{bucket_strip(v)}"
        + (f'<p class="bad">{escape(v.diff.schema_problem)}</p>' if v.diff.schema_problem else "")
        + (f"<p>{escape(v.not_compared)}</p>" if v.not_compared else "")
        + "<ul>" + "".join(f'<li>{mark(e.success, "pass", "FAIL")} {escape(e.description)} {escape(e.observed)}'
                           + (f"<br>e.g. {escape(' | '.join(e.samples))}" if e.samples else "") + "</li>"
                           for e in v.gx.expectations) + "</ul>"
        + _samples(run.pipeline, v)
        for v in run.verdicts)
    return page(f"Reconciliation {run.run_id}", f"""
<h1>Reconciliation of {escape(run.pipeline)}: {mark(run.success, "EXACT MATCH", "FAILED")}</h1>
<p>Run {escape(run.run_id)} at {escape(f"{run.started_at:%Y-%m-%d %H:%M:%S} UTC")}; stream batch {p.batch_id} of
{escape(p.app_id)}; topic {escape(p.topic)} {escape(spans)}; {run.snapshot.records:,} records in the log prefix;
code {escape(run.snapshot.code_version)}.</p>
{f'<p class="bad">Code differs: {escape(run.code_note)}.</p>' if run.code_note else ""}
<p>{escape(run.kind.capitalize())} run: {escape(run.kind_reason or "the whole log recomputed")}.
{"Rows are compared on the keys changed since that run; the count contract compares every whole table."
 if run.builds_on else ""}</p>
<p>Time: {escape(timing)}. {link(run.docs_url, "Great Expectations Data Docs")}
{link(dbt_docs.as_uri() if dbt_docs else "", "dbt docs of the marts over the serving views")}
{link(overview.as_uri() if overview else "", f"{run.pipeline} over time (overview)")}</p>
<table><tr><th class="l">table</th><th>stream version</th><th>snapshot version</th><th>stream rows</th>
<th>batch rows</th><th>matched</th>{"".join(f"<th>{k}</th>" for k in KINDS)}<th>buckets differing</th>
<th class="l">verdict</th></tr>{rows}</table>
{"<h2>Record-count contract</h2><table><tr><th class='l'>equation</th><th>left</th><th>right</th><th></th></tr>"
 + contract + "</table>" if run.contract else ""}
<h2>Per table</h2>{details}""")


def write_report(settings: Settings, run: AuditRun) -> Path:
    """Write the run's page and refresh ``latest.html`` beside it; link the dbt docs once they exist."""
    path = report_path(settings, run.pipeline, run.run_id)
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    dbt_docs = dbt_docs_index(settings, run.pipeline)
    overview = overview_path(settings, run.pipeline).resolve()
    path.write_text(render(run, dbt_docs if dbt_docs.exists() else None, overview))
    shutil.copyfile(path, latest_report_path(settings, run.pipeline))
    return path
