"""The chaos suite's results: ``results.json`` for machines, ``report.html`` (inline SVG, no assets) for people.

Both are rewritten after every scenario, so an interrupted run still leaves what it learnt.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict
from pathlib import Path

from spark_apps.core.html import BAD, CHART_WIDTH, GOOD, LABEL_WIDTH, escape, hbars, mark, page
from spark_apps.lab.scenario import ChaosPlan, ScenarioResult


def summary(plan: ChaosPlan, results: list[ScenarioResult], duration_s: float) -> dict:
    """The JSON document: the plan, totals over every scenario, then each scenario as recorded."""
    def total(name: str) -> int | None:
        values = [getattr(r, name) for r in results]
        return None if any(v is None for v in values) else sum(values)

    return {
        "written_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "plan": {"kills": plan.kills, "events": plan.events, "seed": plan.seed, "scenarios": list(plan.scenarios)},
        "passed": bool(results) and len(results) == len(plan.scenarios) and all(r.passed for r in results),
        "duration_s": round(duration_s, 1),
        "totals": {"scenarios_run": len(results), "scenarios_passed": sum(r.passed for r in results),
                   "kills": sum(r.kills for r in results), "records": sum(r.records for r in results),
                   "lost": total("lost"), "duplicated": total("duplicated"), "unexpected": total("unexpected")},
        "scenarios": [asdict(r) for r in results],
    }


def write_reports(root: Path, plan: ChaosPlan, results: list[ScenarioResult], duration_s: float) -> dict:
    document = summary(plan, results, duration_s)
    root.mkdir(parents=True, exist_ok=True)
    (root / "results.json").write_text(json.dumps(document, indent=2, default=str))
    (root / "report.html").write_text(render_html(document))
    return document


def render_html(document: dict) -> str:
    totals = document["totals"]
    verdict = mark(document["passed"], "PASSED", "FAILED")
    rows = "".join(_row(s) for s in document["scenarios"])
    notes = "".join(f"<h3>{escape(s['name'])}</h3><ul>{''.join(f'<li>{escape(n)}</li>' for n in s['notes'])}</ul>"
                    for s in document["scenarios"])
    return page("Chaos suite", f"""<h1>Chaos suite {verdict}</h1>
<p>{totals['scenarios_passed']}/{totals['scenarios_run']} scenarios passed; {totals['kills']} kills -9;
{totals['records']:,} records produced; checker over all scenarios: lost={_n(totals['lost'])}
duplicated={_n(totals['duplicated'])} unexpected={_n(totals['unexpected'])}; {document['duration_s']:.0f}s;
plan {escape(json.dumps(document['plan']))}; written {escape(document['written_at'])}</p>
<table><tr><th class="l">scenario</th><th>verdict</th><th>kills</th><th>records</th><th>launches</th>
<th>lost</th><th>duplicated</th><th>unexpected</th><th>reconciliation</th><th>duration</th><th class="l">error</th></tr>
{rows}</table>
<h2>Duration and kills per scenario</h2>{_duration_chart(document['scenarios'])}
<h2>Kills: seconds after the stream process was launched</h2>{_kill_chart(document['scenarios'])}
<h2>What happened</h2>{notes}""")


def _row(s: dict) -> str:
    reconciled = "not run" if s["reconciled"] is None else mark(s["reconciled"], "MATCH", "MISMATCH")
    counts = "".join(f"<td>{_n(s[k])}</td>" for k in ("lost", "duplicated", "unexpected"))
    return (f"<tr><td class=\"l\">{escape(s['name'])}</td><td>{mark(s['passed'], 'PASS', 'FAIL')}</td>"
            f"<td>{s['kills']}</td><td>{s['records']:,}</td><td>{s['launches']}</td>{counts}<td>{reconciled}</td>"
            f"<td>{s['duration_s']:.0f}s</td><td class=\"l\">{escape(s['error'])}</td></tr>")


def _duration_chart(scenarios: list[dict]) -> str:
    return hbars([(s["name"], s["duration_s"], f'{s["duration_s"]:.0f}s, {s["kills"]} kills') for s in scenarios],
                 colours=[GOOD if s["passed"] else BAD for s in scenarios])


def _kill_chart(scenarios: list[dict]) -> str:
    """One dot per kill: random kills blue, hook-driven ones orange, by seconds after the launch they hit."""
    kills = [(s["name"], k) for s in scenarios for k in s["kill_log"]]
    if not kills:
        return "<p>no kills in this run</p>"
    latest = max(k["after_launch_s"] for _, k in kills) or 1
    dots = []
    for i, (name, kill) in enumerate(kills):
        x = LABEL_WIDTH + int(CHART_WIDTH * kill["after_launch_s"] / latest)
        colour = "#1f6feb" if kill["kind"] == "random" else "#d97706"
        where = kill.get("stage") or (f"in batch {kill['batch_in_flight']}" if kill["batch_in_flight"] is not None
                                      else "between batches")
        dots.append(f'<circle cx="{x}" cy="{i * 8 + 8}" r="3.5" fill="{colour}"><title>{escape(name)} kill {i + 1}: '
                    f'{escape(kill["kind"])}, {escape(where)}, {kill["after_launch_s"]}s</title></circle>')
    axis = (f'<text x="0" y="12" font-size="12">blue: random, orange: hook</text>'
            f'<text x="{LABEL_WIDTH}" y="{len(kills) * 8 + 24}" font-size="11">0s</text>'
            f'<text x="{LABEL_WIDTH + CHART_WIDTH - 30}" y="{len(kills) * 8 + 24}" font-size="11">{latest:.0f}s</text>')
    return f'<svg width="{LABEL_WIDTH + CHART_WIDTH + 40}" height="{len(kills) * 8 + 30}">{axis}{"".join(dots)}</svg>'


def _n(count: int | None) -> str:
    """A count, or "-" where the checker did not run."""
    return "-" if count is None else str(count)


