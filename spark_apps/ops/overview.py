"""One page per pipeline with its history at a glance, for on-call: every reconciliation's verdict and row counts per
table, how long each audit took and of which kind, the stream's lag and end-to-end latency per micro-batch, the
serving mode of each gold table over time with the reason for each switch, and the incidents, open and resolved.

Written after every scheduled or command-line reconciliation and by ``kappa report --pipeline P``, to
``<reports>/overview/<pipeline>.html``. The plots are matplotlib's, inlined as SVG: the page is one file with no
script and nothing to fetch, so it opens from a mail attachment as well as from disk.

``gather`` reads the warehouse (Spark, the Delta log); ``render`` is a pure function of what it read.
"""

from __future__ import annotations

import datetime as dt
import io
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from spark_apps.alerts.dispatch import ALERTS_TABLE, record_pending
from spark_apps.audit.ledger import LEDGER_TABLE
from spark_apps.core.html import BAD, COLOURS, GOOD, escape, link, page
from spark_apps.core.paths import latest_report_path, overview_path
from spark_apps.core.settings import Settings
from spark_apps.io import delta_log
from spark_apps.io.catalog import read_if_present, table_path
from spark_apps.pipeline.target import Target
from spark_apps.serving.state import KAPPA, SERVING_STATE_TABLE

log = logging.getLogger(__name__)
RUNS_SHOWN = 200  # the newest reconciliations on the page
BATCHES_SHOWN = 300  # the newest micro-batches
INCIDENTS_SHOWN = 100
BUCKET_MS = 100  # the log append times of a batch's records, to this precision
BLUE, OPEN, PURPLE = COLOURS[0], COLOURS[1], COLOURS[3]  # the HTML kit's palette, as on every page


@dataclass(frozen=True)
class Verdict:
    run_id: str
    table: str
    started_at: dt.datetime
    finished_at: dt.datetime
    kind: str
    success: bool
    stream_rows: int
    batch_rows: int


@dataclass(frozen=True)
class Batch:
    """One micro-batch: when its commit landed, and how long its records waited for it."""

    batch_id: int
    committed_at: dt.datetime
    records: int
    latency_p50_s: float
    latency_max_s: float
    lag_records: int  # records already in the log when it committed, left for later batches


@dataclass(frozen=True)
class Switch:
    table: str
    decided_at: dt.datetime
    mode: str
    previous_mode: str
    reason: str


@dataclass(frozen=True)
class Incident:
    dedup_key: str
    severity: str
    opened_at: dt.datetime
    summary: str
    resolved_at: dt.datetime | None


@dataclass
class Overview:
    pipeline: str
    generated_at: dt.datetime
    verdicts: list[Verdict] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)
    switches: list[Switch] = field(default_factory=list)
    incidents: list[Incident] = field(default_factory=list)
    report: Path | None = None


# ---- I/O ------------------------------------------------------------------------------------------------------------

def write_overview(spark, settings: Settings, target: Target) -> Path:
    """Gather the pipeline's history and write its page; returns the page's path."""
    overview = gather(spark, settings, target)
    path = overview_path(settings, target.pipeline.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(overview), encoding="utf-8")
    log.info("overview of %s: %s", target.pipeline.name, path)
    return path


def gather(spark, settings: Settings, target: Target) -> Overview:
    name = target.pipeline.name
    report = latest_report_path(settings, name)
    return Overview(name, dt.datetime.now(dt.UTC), _verdicts(spark, settings, name), _batches(spark, settings, target),
                    _switches(spark, settings, name), _incidents(spark, settings, target),
                    report if report.exists() else None)


def _verdicts(spark, settings: Settings, pipeline: str) -> list[Verdict]:
    from pyspark.sql import functions as F

    rows = read_if_present(spark, settings, LEDGER_TABLE)
    if rows is None:
        return []
    mine = rows.where(F.col("pipeline") == pipeline)
    newest = [r.run_id for r in mine.groupBy("run_id").agg(F.max("started_at").alias("at"))
              .orderBy(F.col("at").desc()).limit(RUNS_SHOWN).collect()]
    kind = F.coalesce(F.col("kind"), F.lit("full")) if "kind" in mine.columns else F.lit("full")
    chosen = mine.where(F.col("run_id").isin(newest)).select(
        "run_id", "table", "started_at", "finished_at", kind.alias("kind"), "success", "stream_rows", "batch_rows")
    return [Verdict(r.run_id, r.table, _utc(r.started_at), _utc(r.finished_at), r.kind, bool(r.success),
                    int(r.stream_rows or 0), int(r.batch_rows or 0)) for r in chosen.collect()]


def _batches(spark, settings: Settings, target: Target) -> list[Batch]:
    """The newest micro-batches of the served generation's store: commit times from its Delta log, the records'
    log append times from its rows, in buckets of ``BUCKET_MS``."""
    from pyspark.sql import functions as F

    from spark_apps.pipeline.folds import BATCH
    from spark_apps.transforms.store import KIND, RECORD

    store = table_path(settings, target.tables.store)
    if not delta_log.has_commits(store):
        return []
    committed = {}
    for commit in delta_log.commits(store, BATCHES_SHOWN * 2):
        batch = commit.meta.get("batch_id")
        if batch is not None and commit.timestamp_ms is not None and "app_id" in commit.meta:
            committed.setdefault(int(batch), commit.timestamp_ms)
        if len(committed) >= BATCHES_SHOWN:
            break
    if not committed:
        return []
    buckets = (spark.read.format("delta").load(str(store))
               .where((F.col(KIND) == RECORD) & (F.col(BATCH) >= min(committed)))
               .groupBy(F.col(BATCH).alias("batch"),
                        F.floor(F.unix_millis("log_append_time") / BUCKET_MS).alias("bucket"))
               .count().collect())
    return batch_timings(committed, [(int(r.batch), int(r.bucket) * BUCKET_MS, int(r["count"])) for r in buckets])


def _switches(spark, settings: Settings, pipeline: str) -> list[Switch]:
    from pyspark.sql import functions as F

    rows = read_if_present(spark, settings, SERVING_STATE_TABLE)
    if rows is None:
        return []
    chosen = rows.where(F.col("pipeline") == pipeline).orderBy("decided_at")
    return [Switch(r.table, _utc(r.decided_at), r.mode, r.previous_mode, r.reason or "") for r in chosen.collect()]


def _incidents(spark, settings: Settings, target: Target) -> list[Incident]:
    from pyspark.sql import functions as F

    record_pending(spark, settings)
    rows = read_if_present(spark, settings, ALERTS_TABLE)
    if rows is None:
        return []
    action = F.coalesce(F.col("action"), F.lit("trigger")) if "action" in rows.columns else F.lit("trigger")
    found = rows.select("dedup_key", "severity", "raised_at", "summary", action.alias("action")).collect()
    mine = [r for r in found if concerns(r.dedup_key, target.pipeline.name, target.topic)]
    return incidents([(r.dedup_key, r.severity, _utc(r.raised_at), r.summary, r.action) for r in mine])


def _utc(moment: dt.datetime) -> dt.datetime:
    """Spark hands timestamps back naive, in the driver's time zone."""
    return moment.astimezone(dt.UTC) if moment.tzinfo else moment.astimezone().astimezone(dt.UTC)


# ---- pure -----------------------------------------------------------------------------------------------------------

def batch_timings(committed: dict[int, int], buckets: Iterable[tuple[int, int, int]]) -> list[Batch]:
    """Per batch (``committed``: batch id -> commit time, epoch ms), from ``(batch, append time ms, records)``: the
    median and the longest wait of its records from log append to commit, and the records of later batches that the
    log already held when it committed (its lag)."""
    by_batch: dict[int, list[tuple[int, int]]] = {}
    for batch, appended_ms, records in buckets:
        by_batch.setdefault(batch, []).append((appended_ms, records))
    found = []
    for batch, at_ms in sorted(committed.items()):
        waits = sorted(((at_ms - appended) / 1000, n) for appended, n in by_batch.get(batch, []))
        total = sum(n for _, n in waits)
        lag = sum(n for later, rows in by_batch.items() if later > batch for appended, n in rows if appended <= at_ms)
        found.append(Batch(batch, dt.datetime.fromtimestamp(at_ms / 1000, dt.UTC), total,
                           max(0.0, _weighted_median(waits, total)), max([0.0, *(w for w, _ in waits)]), lag))
    return found


def _weighted_median(values: list[tuple[float, int]], total: int) -> float:
    """The middle value of sorted ``(value, how many)``."""
    seen = 0
    for value, count in values:
        seen += count
        if seen * 2 >= total:
            return value
    return 0.0


def concerns(dedup_key: str, pipeline: str, topic: str) -> bool:
    """Whether an incident is the pipeline's: its name in the key (``reconcile:<p>:…``, ``dbt:<p>``), one of its
    DAGs (``airflow:kappa_<p>_…``, ``deadline:kappa_<p>_…``), or its topic's retention."""
    kind, _, rest = dedup_key.partition(":")
    if kind in ("airflow", "deadline"):
        return rest.startswith(f"kappa_{pipeline}_")
    if kind == "retention":
        return rest == topic
    return rest.split(":")[0] == pipeline


def incidents(alerts: Sequence[tuple[str, str, dt.datetime, str, str]]) -> list[Incident]:
    """Alerts ``(dedup key, severity, raised at, summary, action)`` as incidents: one from a trigger while none of its
    key is open, closed by the next resolve of that key; repeated triggers fold into the open one. Newest first."""
    done: list[Incident] = []
    opened: dict[str, Incident] = {}
    for key, severity, at, summary, action in sorted(alerts, key=lambda a: a[2]):
        if action == "resolve":
            if key in opened:
                done.append(_closed(opened.pop(key), at))
        elif key not in opened:
            opened[key] = Incident(key, severity, at, summary, None)
    every = [*done, *opened.values()]
    return sorted(every, key=lambda i: i.opened_at, reverse=True)[:INCIDENTS_SHOWN]


def _closed(incident: Incident, at: dt.datetime) -> Incident:
    return Incident(incident.dedup_key, incident.severity, incident.opened_at, incident.summary, at)


def render(overview: Overview) -> str:
    """The whole page."""
    opened = [i for i in overview.incidents if i.resolved_at is None]
    gold = sorted({s.table for s in overview.switches})
    served = {s.table: s for s in overview.switches}
    state = (f"{sum(served[t].mode == KAPPA for t in gold)} of {len(gold)} gold tables serve the stream"
             if gold else "no serving decision yet")
    last = max(overview.verdicts, key=lambda v: v.started_at, default=None)
    last_run = [v for v in overview.verdicts if last and v.run_id == last.run_id]
    verdict = ("no reconciliation yet" if last is None else
               f"last reconciliation {last.run_id} {'EXACT' if all(v.success for v in last_run) else 'FAILED'}")
    body = f"""
<h1>{escape(overview.pipeline)}: overview</h1>
<p>{escape(verdict)}; {escape(state)}; {len(opened)} open incident(s). Written
{escape(f"{overview.generated_at:%Y-%m-%d %H:%M:%S} UTC")}. {link(overview.report.as_uri() if overview.report else "",
                                                                      "Latest reconciliation report")}</p>
<h2>Reconciliation</h2>
{_figure("verdicts", "Verdict of each table per run", _verdict_plot(overview.verdicts))}
{_figure("rows", "Rows compared per table per run (stream; x: the batch's where it differs; an incremental run "
         "compares the keys its new records touch)", _rows_plot(overview.verdicts))}
{_figure("audits", "Audit duration and kind", _audit_plot(overview.verdicts))}
<h2>Stream</h2>
{_figure("latency", "End-to-end latency per micro-batch: log append to commit", _latency_plot(overview.batches))}
{_figure("lag", "Lag at each micro-batch's commit: records in the log not yet in a batch", _lag_plot(overview.batches))}
<h2>Serving</h2>
{_figure("serving", "Serving mode per gold table", _serving_plot(overview.switches, overview.generated_at))}
{_switch_table(overview.switches)}
<h2>Incidents</h2>
{_figure("incidents", "Incidents: open (orange) and resolved (grey)",
         _incident_plot(overview.incidents, overview.generated_at))}
{_incident_table(overview.incidents)}"""
    return page(f"{overview.pipeline} overview", body)


def _figure(name: str, title: str, svg: str | None) -> str:
    if svg is None:
        return f'<h3>{escape(title)}</h3><p class="note" id="{name}">nothing recorded yet</p>'
    return f'<h3>{escape(title)}</h3><figure class="plot" id="{name}">{svg}</figure>'


def _svg(draw) -> str:
    """A matplotlib figure drawn by ``draw(axes)``, as inline SVG (text as text, not paths)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import dates
    from matplotlib import pyplot as plt

    with matplotlib.rc_context({"svg.fonttype": "none", "font.size": 9}):
        figure, axes = plt.subplots(figsize=(11, 2.8))
        try:
            draw(axes)
            axes.grid(True, alpha=0.3)
            locator = dates.AutoDateLocator()
            axes.xaxis.set_major_locator(locator)
            axes.xaxis.set_major_formatter(dates.ConciseDateFormatter(locator))
            if axes.get_legend_handles_labels()[0]:
                axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
            figure.tight_layout()
            out = io.StringIO()
            figure.savefig(out, format="svg")
        finally:
            plt.close(figure)
    text = out.getvalue()
    return text[text.index("<svg"):]


def _verdict_plot(verdicts: list[Verdict]) -> str | None:
    if not verdicts:
        return None
    tables = sorted({v.table for v in verdicts})

    def draw(axes) -> None:
        for ok, colour, marker, label in ((True, GOOD, "o", "exact"), (False, BAD, "X", "differs or failed")):
            chosen = [v for v in verdicts if v.success is ok]
            if chosen:
                axes.scatter([v.started_at for v in chosen], [tables.index(v.table) for v in chosen], c=colour,
                             marker=marker, s=30, label=label)
        axes.set_yticks(range(len(tables)), tables)
    return _svg(draw)


def _rows_plot(verdicts: list[Verdict]) -> str | None:
    shown = [v for v in verdicts if not v.table.startswith("contract.")]
    if not shown:
        return None

    def draw(axes) -> None:
        for table in sorted({v.table for v in shown}):
            mine = sorted((v for v in shown if v.table == table), key=lambda v: v.started_at)
            line, = axes.plot([v.started_at for v in mine], [v.stream_rows for v in mine], marker=".", label=table)
            differs = [v for v in mine if v.batch_rows != v.stream_rows]
            if differs:
                axes.scatter([v.started_at for v in differs], [v.batch_rows for v in differs], marker="x",
                             color=line.get_color())
        axes.set_ylabel("rows")
    return _svg(draw)


def _audit_plot(verdicts: list[Verdict]) -> str | None:
    runs = {v.run_id: v for v in verdicts}
    if not runs:
        return None

    def draw(axes) -> None:
        for kind, colour in (("full", BLUE), ("incremental", PURPLE)):
            chosen = [v for v in runs.values() if v.kind == kind]
            if chosen:
                axes.scatter([v.started_at for v in chosen],
                             [(v.finished_at - v.started_at).total_seconds() for v in chosen], c=colour, label=kind)
        axes.set_ylabel("seconds")
        axes.set_ylim(bottom=0)
    return _svg(draw)


def _latency_plot(batches: list[Batch]) -> str | None:
    if not batches:
        return None

    def draw(axes) -> None:
        times = [b.committed_at for b in batches]
        axes.plot(times, [b.latency_max_s for b in batches], marker=".", color=BAD, label="longest wait")
        axes.plot(times, [b.latency_p50_s for b in batches], marker=".", color=BLUE, label="median wait")
        axes.set_ylabel("seconds")
        axes.set_ylim(bottom=0)
    return _svg(draw)


def _lag_plot(batches: list[Batch]) -> str | None:
    if not batches:
        return None

    def draw(axes) -> None:
        axes.plot([b.committed_at for b in batches], [b.lag_records for b in batches], marker=".", color=OPEN)
        axes.set_ylabel("records")
        axes.set_ylim(bottom=0)
    return _svg(draw)


def _serving_plot(switches: list[Switch], now: dt.datetime) -> str | None:
    if not switches:
        return None
    tables = sorted({s.table for s in switches})

    def draw(axes) -> None:
        for row, table in enumerate(tables):
            mine = [s for s in switches if s.table == table]
            for decision, following in zip(mine, [*mine[1:], None], strict=True):
                end = following.decided_at if following else now
                colour = GOOD if decision.mode == KAPPA else BLUE
                axes.broken_barh([(decision.decided_at, end - decision.decided_at)], (row - 0.35, 0.7),
                                 color=colour)
        axes.set_yticks(range(len(tables)), tables)
        axes.scatter([], [], marker="s", c=GOOD, label="stream (kappa)")
        axes.scatter([], [], marker="s", c=BLUE, label="batch (lambda)")
    return _svg(draw)


def _incident_plot(found: list[Incident], now: dt.datetime) -> str | None:
    if not found:
        return None
    keys = sorted({i.dedup_key for i in found})

    def draw(axes) -> None:
        for incident in found:
            end = incident.resolved_at or now
            axes.broken_barh([(incident.opened_at, max(end - incident.opened_at, dt.timedelta(seconds=1)))],
                             (keys.index(incident.dedup_key) - 0.35, 0.7),
                             color="#999999" if incident.resolved_at else OPEN)
        axes.set_yticks(range(len(keys)), keys)
    return _svg(draw)


def _switch_table(switches: list[Switch]) -> str:
    changed = [s for s in switches if s.mode != s.previous_mode]
    if not changed:
        return ""
    rows = "".join(f'<tr><td class="l">{escape(f"{s.decided_at:%Y-%m-%d %H:%M:%S}")}</td><td class="l">'
                   f'{escape(s.table)}</td><td class="l">{escape(s.previous_mode)} &rarr; {escape(s.mode)}</td>'
                   f'<td class="l">{escape(s.reason)}</td></tr>' for s in reversed(changed))
    return ('<table><tr><th class="l">when (UTC)</th><th class="l">table</th><th class="l">switch</th>'
            f'<th class="l">why</th></tr>{rows}</table>')


def _incident_table(found: list[Incident]) -> str:
    if not found:
        return ""
    ordered = sorted(found, key=lambda i: (i.resolved_at is not None, -i.opened_at.timestamp()))
    rows = "".join(
        f'<tr><td class="l">{escape(i.dedup_key)}</td><td class="l">{escape(i.severity)}</td>'
        f'<td class="l">{escape(f"{i.opened_at:%Y-%m-%d %H:%M:%S}")}</td><td class="l">'
        + (escape(f"{i.resolved_at:%Y-%m-%d %H:%M:%S}") if i.resolved_at else '<span class="bad">open</span>')
        + f'</td><td class="l">{escape(" ".join(i.summary.split())[:300])}</td></tr>' for i in ordered)
    return ('<table><tr><th class="l">dedup key</th><th class="l">severity</th><th class="l">opened (UTC)</th>'
            f'<th class="l">resolved (UTC)</th><th class="l">what opened it</th></tr>{rows}</table>')
