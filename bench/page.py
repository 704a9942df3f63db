"""The HTML page of a benchmark run: the numbers of ``bench.json`` as tables and inline SVG charts."""

from __future__ import annotations

from spark_apps.core.html import COLOURS, escape, hbars, page, scatter


def _n(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _throughput(doc: dict) -> str:
    rows = []
    for label, key in (("Python producer", "producer"), ("`kappa produce --file` of a CSV", "file_producer"),
                       ("raw Kafka read (Spark)", "raw_kafka_read"),
                       ("limit: plain Kafka -> Parquet", "limit"), ("platform stream (all tables)", "platform")):
        measured = doc.get(key)
        if measured:
            rows.append((label, measured["records_per_s"], f'{measured["records_per_s"]:,.0f} records/s'))
    ratio = doc.get("platform_to_limit")
    caption = f"<p>Platform / limit: <b>{ratio:.0%}</b> of the plain append's throughput.</p>" if ratio else ""
    sent = doc.get("file_producer")
    if sent:
        caption += (f"<p>The file producer sent a {sent['file_bytes'] / 2**20:,.0f} MiB CSV at "
                    f"{sent['mb_per_s']:,.1f} MB/s with a peak memory of {sent['peak_rss_mib']:,.0f} MiB.</p>")
    status = doc.get("status")
    if status:
        caption += (f"<p><code>kappa status</code> answered in {status['seconds']:.1f} s at the slowest over a "
                    f"ledger of {status['ledger_runs_added']:,} more runs, Airflow "
                    f"{escape(status.get('airflow', 'not started'))}.</p>")
    return hbars(rows) + caption


def _latency(doc: dict) -> str:
    rows = []
    for run in doc.get("latency", []):
        for point, value in run["latency_s"].items():
            rows.append((f'{run["target_rate"]:,.0f}/s {point}', value or 0, f"{_n(value, 2)} s"))
    return hbars(rows, COLOURS[1])


def _latency_over_time(doc: dict) -> str:
    series = {}
    for run in doc.get("latency", []):
        rate = f'{run["target_rate"]:,.0f}/s'
        series[f"{rate} p50"] = [(b["t_s"], b["p50"]) for b in run.get("timeline", [])]
        series[f"{rate} max"] = [(b["t_s"], b["max"]) for b in run.get("timeline", [])]
    return scatter(series, "seconds since the run's first append", "latency seconds")


def _jobs(doc: dict) -> str:
    jobs, commits = doc.get("jobs_per_batch") or {}, doc.get("commits_per_batch") or {}
    if not jobs.get("batches"):
        return "<p>not measured in this run</p>"
    text = (f"<p>{jobs['total']:,} Spark jobs over {jobs['batches']} catch-up micro-batches: "
            f"mean {_n(jobs['mean'], 1)}, p50 {_n(jobs['p50'])}, max {_n(jobs['max'])} a batch.")
    if commits.get("batches"):
        text += (f" Delta commits: mean {_n(commits['mean'], 1)}, p50 {_n(commits['p50'])}, "
                 f"max {_n(commits['max'])} a batch.")
    return text + "</p>"


def _batch_cost(doc: dict) -> str:
    growth = doc.get("batch_cost_growth") or {}
    points = growth.get("points", [])
    chart = scatter({"every micro-batch of the run": [(p["rows_before"], p["seconds"])
                                                      for p in growth.get("every_batch", [])],
                     "micro-batches of one size": [(p["rows_before"], p["seconds"]) for p in points]},
                    "table rows before the batch", "batch seconds")
    if not points:
        return chart
    small, large = growth["small"], growth["large"]
    return chart + (f"<p>Micro-batches of {_n(small['records_p50'] or large['records_p50'])} records: p50 "
                    f"{_n(small['p50_s'], 1)} s with at most {growth['small_max_rows']:,} rows in the tables "
                    f"({small['batches']} batches), {_n(large['p50_s'], 1)} s with at least "
                    f"{growth['large_min_rows']:,} ({large['batches']} batches); ratio {_n(growth['ratio'], 2)}.</p>")


def _recompute(doc: dict) -> str:
    rows = []
    for size in doc.get("sizes", []):
        audit = size.get("recompute_and_reconcile")
        if not audit:
            continue
        for phase, seconds in audit["phases_s"].items():
            rows.append((f'{size["events"]:,} events: {phase}', seconds, f"{seconds:,.1f} s"))
        rows.append((f'{size["events"]:,} events: total', audit["seconds"], f'{audit["seconds"]:,.1f} s'))
        extended = size.get("incremental_audit")
        if extended:
            rows.append((f'+{extended["new_events"]:,} new events, incremental: total', extended["seconds"],
                         f'{extended["seconds"]:,.1f} s'))
    return hbars(rows, COLOURS[2])


def _stages(doc: dict) -> str:
    stages = (doc.get("platform") or {}).get("stage_seconds", {})
    return hbars([(stage, seconds, f"{seconds:,.1f} s") for stage, seconds in stages.items()], COLOURS[3])


def _batches(doc: dict) -> str:
    batches = (doc.get("platform") or {}).get("per_batch", [])
    return scatter({"micro-batch": [(b["batch_id"], b["seconds"]) for b in batches]}, "batch id", "seconds")


def _machine(doc: dict) -> str:
    return "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in doc.get("machine", {}).items())


def _serving_reads(doc: dict) -> str:
    reads = doc.get("serving_reads") or {}
    if not reads.get("compacted"):
        return "<p>not measured in this run</p>"
    rows = "".join(f"<tr><td>{escape(table)}</td><td>{_n(reads['uncompacted'][table]['one_key_s'], 3)}</td>"
                   f"<td>{_n(reads['compacted'][table]['one_key_s'], 3)}</td>"
                   f"<td>{_n(reads['uncompacted'][table]['full_scan_s'], 3)}</td>"
                   f"<td>{_n(reads['compacted'][table]['full_scan_s'], 3)}</td></tr>" for table in reads["compacted"])
    return ("<table><tr><th>view</th><th>one key, tail (s)</th><th>one key, compacted (s)</th>"
            "<th>full scan, tail (s)</th><th>full scan, compacted (s)</th></tr>" + rows + "</table>"
            f"<p>Tail partial rows before compaction: {escape(reads.get('tail_partial_rows'))}.</p>")


def _storage(doc: dict) -> str:
    found = doc.get("storage") or {}
    if not found.get("s3"):
        return "<p>not measured in this run</p>"
    measures = (("stream catch-up (records/s)", "stream_records_per_s", 0), ("micro-batch p50 (s)", "batch_p50_s", 2),
                ("full audit (s)", "full_audit_s", 1), ("one-key read p50, slowest view (s)", "one_key_p50_s", 3),
                ("full scan p50, slowest view (s)", "full_scan_p50_s", 3))
    rows = "".join(f"<tr><td>{escape(label)}</td><td>{_n(found['local'].get(key), digits)}</td>"
                   f"<td>{_n(found['s3'].get(key), digits)}</td></tr>" for label, key, digits in measures)
    return (f"<p>{found['events']:,} events in batches of {found.get('batch_records', 0):,}, the same log on each, "
            "after an uncounted pass that warms the JVM up.</p><table><tr><th></th><th>local disk</th>"
            f"<th>S3 server ({escape(found['endpoint'])})</th></tr>{rows}</table>")


def render(doc: dict) -> str:
    growth = "".join(f'<li>{g["from"]:,} -> {g["to"]:,} events: time x{g["time_ratio"]} for size x{g["size_ratio"]} '
                     f'(exponent {_n(g["exponent"], 2)}; 1.0 is linear)</li>' for g in doc.get("growth", []))
    title = f"kappa bench {doc.get('measured_at', '')}"
    return page(title, f"""<h1>Benchmark, {escape(doc.get("measured_at", ""))}</h1>
<p class="note">All numbers from one run on one machine, same records for every measurement. Load average at
start {escape(doc.get("machine", {}).get("load_at_start"))}, at end {escape(doc.get("machine", {}).get("load_at_end"))}
(anything well above 0 means something else competed for the cores).</p>
<h2>Throughput</h2>{_throughput(doc)}
<h2>Where a platform micro-batch spends its time (summed over batches)</h2>{_stages(doc)}
<h2>Platform micro-batch durations</h2>{_batches(doc)}
<h2>Spark jobs per platform micro-batch</h2>{_jobs(doc)}
<h2>Micro-batch cost against table size</h2>{_batch_cost(doc)}
<h2>End to end latency, log append to visible in gold</h2>{_latency(doc)}
<h2>Latency over the latency runs (per 5 s of log append time)</h2>{_latency_over_time(doc)}
<h2>Serving reads, tail uncompacted and compacted (p50)</h2>{_serving_reads(doc)}
<h2>Batch recompute and reconciliation</h2>{_recompute(doc)}<ul>{growth}</ul>
<h2>Warehouse on local disk and on object storage</h2>{_storage(doc)}
<h2>Machine</h2><table>{_machine(doc)}</table>""")
