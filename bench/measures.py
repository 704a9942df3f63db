"""Each measurement of `make bench`, against the real broker and Spark; every one returns a plain dict."""

from __future__ import annotations

import time
from pathlib import Path

from bench import stats
from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import Settings
from spark_apps.io import delta_log, lineage
from spark_apps.io.catalog import table_path
from spark_apps.io.producer import produce
from spark_apps.io.stream_store import read_view
from spark_apps.io.topics import ensure_topic, partition_offsets
from spark_apps.pipeline.declaration import Pipeline
from spark_apps.pipeline.synthetic import GeneratorRequest
from spark_apps.pipeline.target import Target
from spark_apps.stream.job import StreamJob
from spark_apps.target.resolution import target_of

NOMINAL_RATE = 1000.0  # events per second of event time, for a production not paced in real time


class EventClock:
    """The event time the bench's productions are dated from: each continues where the one before ended, or starts
    now if that is later, so the log's newest records carry its newest event times, as a live log's do.

    The catch-up is produced far faster than it is dated (10M events in minutes, 10,000 s of event time), so it ends
    hours ahead of the wall clock. Dated from the moment it starts, a later production (the incremental audit's new
    events, a latency run) landed inside the catch-up's span: every gold window or session it touched overlapped the
    files written after that point, and a batch of 100,000 events read most of a 10M-row silver."""

    def __init__(self) -> None:
        self.next_ms = 0

    def dating(self, events: int, events_per_second: float) -> int:
        """The base time of a production of ``events`` at ``events_per_second``; the clock moves past its end."""
        base = max(int(time.time() * 1000), self.next_ms)
        self.next_ms = base + int(events * 1000 / events_per_second)
        return base


def produce_events(settings: Settings, pipeline: Pipeline, events: int, seed: int, clock: EventClock,
                   rate: float | None = None) -> dict:
    """Python producer throughput: the platform's idempotent kafka-python producer, the pipeline's generator
    included."""
    per_second = rate or NOMINAL_RATE
    request = GeneratorRequest(seed=seed, events=events, base_time_ms=clock.dating(events, per_second),
                               events_per_second=per_second, allowed_lateness_s=settings.allowed_lateness_s)
    result = produce(settings, pipeline, request, rate=rate, with_manifest=False)
    return {"records": result.sent, "seconds": round(result.elapsed_s, 2), "records_per_s": round(result.rate, 1),
            "target_rate": rate}


def _kafka_reader(spark, settings: Settings, streaming: bool):
    reader = spark.readStream if streaming else spark.read
    return (reader.format("kafka")
            .option("kafka.bootstrap.servers", settings.kafka_bootstrap_servers)
            .option("subscribe", settings.events_topic)
            .option("startingOffsets", "earliest"))


def raw_kafka_read(spark, settings: Settings) -> dict:
    """Every record of the topic read by Spark in one pass and thrown away (a no-op write): what reading the log
    alone costs. The record count comes from the topic's offsets, not from a second pass."""
    records = sum(end - start for start, end in partition_offsets(settings).values())
    started = time.monotonic()
    _kafka_reader(spark, settings, streaming=False).option("endingOffsets", "latest").load() \
        .write.format("noop").mode("overwrite").save()
    seconds = time.monotonic() - started
    return {"records": records, "seconds": round(seconds, 2), "records_per_s": stats.rate(records, seconds)}


def plain_append_limit(spark, settings: Settings, out: Path) -> dict:
    """The ceiling: a plain, non-idempotent Structured Streaming append of the raw records to Parquet, with the
    platform's micro-batch size and nothing else (no parsing, no dedup, no MERGE, no exactly-once tables)."""
    query = (_kafka_reader(spark, settings, streaming=True)
             .option("maxOffsetsPerTrigger", str(settings.max_offsets_per_trigger)).load()
             .writeStream.format("parquet")
             .option("path", str(out / "data")).option("checkpointLocation", str(out / "checkpoint"))
             .trigger(availableNow=True).start())
    started = time.monotonic()
    query.awaitTermination()
    wall = time.monotonic() - started
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    records = sum(p["numInputRows"] for p in progress)
    busy = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
    return {"records": records, "seconds": round(wall, 2), "batch_seconds": round(busy, 2),
            "records_per_s": stats.rate(records, busy), "records_per_s_wall": stats.rate(records, wall),
            "batches": len(progress), "batch_duration_s": stats.percentiles(durations)}


class TimedStreamJob(StreamJob):
    """The platform's stream job, noting when each micro-batch became visible in gold (all of its commits done)
    and how many Spark jobs it started.

    ``foreachBatch`` runs each batch in the driver's Python thread, so a job group set there for the batch tags
    every job the batch's work starts from that thread (no SparkListener needed); the count is read right after
    the batch, while the status tracker still holds its jobs.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.visible_at: dict[int, float] = {}
        self.jobs: dict[int, int] = {}
        self.commits: dict[int, int] = {}

    def process_batch(self, batch_df, batch_id: int) -> None:
        context = batch_df.sparkSession.sparkContext
        group = f"kappa-bench-{self.app_id}-{batch_id}-{time.monotonic_ns()}"
        context.setJobGroup(group, f"bench micro-batch {batch_id}")
        store = table_path(self.settings, self.tables.store)
        before = delta_log.latest_version(store)
        try:
            super().process_batch(batch_df, batch_id)
            self.visible_at[batch_id] = time.time()
        finally:
            self.jobs[batch_id] = len(context.statusTracker().getJobIdsForGroup(group))
            # The store's commits this batch made: a compaction committing meanwhile names no batch.
            self.commits[batch_id] = sum(
                1 for version in range(before + 1, delta_log.latest_version(store) + 1)
                if delta_log.read_commit(store, version).meta.get("batch_id") == batch_id)
            context.setLocalProperty("spark.jobGroup.id", None)
            context.setLocalProperty("spark.job.description", None)


def _per_batch(job: TimedStreamJob, batches) -> list[dict]:
    return [{"batch_id": b.batch_id, "records": b.records, "seconds": round(b.duration_s, 3),
             "jobs": job.jobs.get(b.batch_id), "commits": job.commits.get(b.batch_id),
             "stages": {k: round(v, 3) for k, v in b.stage_seconds.items()}}
            for b in batches]


def platform_stream(spark, settings: Settings, target: Target) -> dict:
    """The full consistent pipeline (bronze, dead letters, silver, every gold table) catching up on the log."""
    job = TimedStreamJob(spark, settings, target)
    started = time.monotonic()
    batches = job.run(until_caught_up=True)
    wall = time.monotonic() - started
    records = sum(b.records for b in batches)
    busy = sum(b.duration_s for b in batches)
    return {"records": records, "seconds": round(wall, 2), "batch_seconds": round(busy, 2),
            "records_per_s": stats.rate(records, busy), "records_per_s_wall": stats.rate(records, wall),
            "batches": len(batches),
            "batch_duration_s": stats.percentiles([b.duration_s for b in batches]),
            "stage_seconds": stats.stage_totals(b.stage_seconds for b in batches),
            "jobs_per_batch": stats.per_batch({b.batch_id: job.jobs[b.batch_id] for b in batches}),
            "commits_per_batch": stats.per_batch({b.batch_id: job.commits[b.batch_id] for b in batches}),
            "per_batch": _per_batch(job, batches)}


# A latency run first produces this long at its rate, untimed, and waits until the stream has read it. A query's
# first batch starts its state store, Kafka consumers and plans, and its batches stay slower for about half a
# minute more while the JVM compiles the query's generated code: after a warm-up of 10 s, the batches of the next
# 25 s took 2.0-3.6 s at 1,000 events/s, every later one 1.4-2.1 s (run of 2026-12-06 03:50). What is timed is a
# stream that was already running, as a deployed one is.
WARM_UP_S = 30


def end_to_end_latency(spark, settings: Settings, target: Target, rate: float, seconds: float,
                       seed: int, clock: EventClock, timeout_s: float = 600) -> dict:
    """Produce at a fixed rate while the stream runs continuously (processing-time trigger); per record, the time
    from its log append (the topic keeps LogAppendTime) to the commit that made its batch visible in gold. The
    stream has run ``WARM_UP_S`` of the same rate first, untimed."""
    pipeline = target.pipeline
    job = TimedStreamJob(spark, settings, target)
    job.prepare()
    query = job.start(until_caught_up=False)

    def caught_up() -> None:
        deadline = time.monotonic() + timeout_s
        while not lineage.caught_up(settings, job.checkpoint, job.topic):
            if not query.isActive or time.monotonic() > deadline:
                raise PlatformError(f"the stream did not catch up within {timeout_s:.0f}s of the {rate:.0f}/s run")
            time.sleep(0.5)

    try:
        produce_events(settings, pipeline, int(rate * WARM_UP_S), seed=seed + 1_000, clock=clock, rate=rate)
        caught_up()
        first_batch = max(lineage.committed_batches(job.checkpoint), default=-1) + 1
        produced = produce_events(settings, pipeline, int(rate * seconds), seed=seed, clock=clock, rate=rate)
        caught_up()
    finally:
        query.stop()
        job.stopped()
    timed = {b: t for b, t in job.visible_at.items() if b >= first_batch}
    ranges = {b: (lineage.batch_start_offsets(job.checkpoint, b, job.topic),
                  lineage.batch_end_offsets(job.checkpoint, b, job.topic)) for b in timed}
    bronze = read_view(spark, settings, job.target, job.tables.bronze)
    low = {p: min(r[0].get(p, 0) for r in ranges.values()) for p in {p for r in ranges.values() for p in r[1]}}
    rows = bronze.where(" OR ".join(f"(partition = {p} AND offset >= {o})" for p, o in low.items()) or "false") \
        .selectExpr("partition", "offset", "CAST(log_append_time AS DOUBLE) AS appended").collect()
    points = stats.record_latencies(((r.partition, r.offset, r.appended) for r in rows), ranges, timed)
    latencies = [latency for _, latency in points]
    batches = [b for b in job.stats if b.batch_id >= first_batch]
    return {"target_rate": rate, "produced": produced, "records_timed": len(latencies),
            "latency_s": stats.percentiles(latencies), "max_latency_s": round(max(latencies, default=0), 3),
            "batches": len(timed), "batch_duration_s": stats.percentiles([b.duration_s for b in batches]),
            "trigger_interval_s": settings.trigger_interval_s, "warm_up_s": WARM_UP_S,
            "timeline": stats.latency_timeline(points),
            "per_batch": _per_batch(job, batches),
            "compactions": [_compaction_of(c) for c in (job.compaction.done if job.compaction else [])]}


def _compaction_of(done) -> dict:
    return {"table": done.table, "from_epoch": done.from_epoch, "through_batch": done.through_batch,
            "rows_before": done.rows_before, "rows_after": done.rows_after, "seconds": round(done.seconds, 2)}


# Issue 24's "batch cost flat in table size" compares micro-batches of one size over small and large tables: this
# many records each, about what a latency run's batch holds at 1,000 events/s. Each run starts the query again, and
# its first batch also loads the state and plans the query for the first time: five batches a run, not three, keep
# that one a fifth of the sample rather than a third.
SAME_SIZE_BATCH_RECORDS = 2_000
SAME_SIZE_BATCHES = 5
# The small side's tables: a warehouse of their own, caught up on this many events (at most 100,000 rows).
SMALL_TABLE_EVENTS = 50_000
SMALL_TABLES_HOME = "small-tables"


def same_size_batches(spark, settings: Settings, target: Target, clock: EventClock, seed: int,
                      records: int = SAME_SIZE_BATCH_RECORDS, batches: int = SAME_SIZE_BATCHES) -> list[dict]:
    """``batches`` micro-batches of ``records`` each over the tables as they stand (the stream must have read the
    whole log): produced at once, streamed with ``maxOffsetsPerTrigger`` = ``records``. Each batch comes with the
    rows its tables held before it: every record of the log before it.

    Kafka's source splits the limit over the partitions and rounds each share down, so a last batch takes the few
    records left over (``stats.batches_of_size`` leaves it out).

    The stream's own compaction is off here: this measures what a batch costs against the size of its tables, and a
    compaction of the large tables landing on five batches of one side would measure the compaction instead (the
    latency runs keep it on, as a deployed stream has it)."""
    rows = sum(end - start for start, end in partition_offsets(settings).values())
    produce_events(settings, target.pipeline, records * batches, seed=seed, clock=clock)
    job = TimedStreamJob(spark, settings.with_overrides(max_offsets_per_trigger=records, compaction_in_stream=False),
                         target)
    points = []
    for batch in job.run(until_caught_up=True):
        points.append({"rows_before": rows, "records": batch.records, "seconds": round(batch.duration_s, 3),
                       "jobs": job.jobs.get(batch.batch_id)})
        rows += batch.records
    return stats.batches_of_size(points, records)


def small_table_settings(settings: Settings) -> Settings:
    """A warehouse, checkpoints and topic of their own beside the run's, on the same broker and catalog."""
    home = settings.home / SMALL_TABLES_HOME
    small = settings.with_overrides(events_topic=f"{settings.events_topic}.{SMALL_TABLES_HOME}",
                                    warehouse_dir=home / "warehouse", checkpoint_root=home / "checkpoints",
                                    reports_dir=home / "reports", gx_dir=home / "gx")
    ensure_topic(small)
    return small


def batch_cost_by_table_size(spark, settings: Settings, target: Target, clock: EventClock,
                             rounds: int = 2) -> list[dict]:
    """Micro-batches of ``SAME_SIZE_BATCH_RECORDS`` over the run's tables and over tables of ``SMALL_TABLE_EVENTS``
    rows, in alternating rounds so the machine's drift falls on both sides alike. The small tables are caught up
    first in one batch that is not counted; each round ends on the run's tables, so the catalog's names point at
    them again."""
    small = small_table_settings(settings)
    # The same pipeline in the small warehouse: its own tables and checkpoint.
    small_target = target_of(small, target.pipeline, spec=target.spec)
    produce_events(small, target.pipeline, SMALL_TABLE_EVENTS, seed=201, clock=clock)
    StreamJob(spark, small, small_target).run(until_caught_up=True)
    points = []
    for round_ in range(rounds):
        for index, (side, side_target) in enumerate(((small, small_target), (settings, target))):
            points += [{**p, "tables": "run" if side is settings else SMALL_TABLES_HOME}
                       for p in same_size_batches(spark, side, side_target, clock, seed=211 + 2 * round_ + index)]
    return points


def recompute_and_reconcile(spark, settings: Settings, target: Target) -> dict:
    """The audit DAG's work: batch recompute from the log, then the comparison with every stream table."""
    from spark_apps.audit.reconciliation import reconcile_or_reuse

    started = time.monotonic()
    run = reconcile_or_reuse(spark, settings, target).run
    return {"records": run.snapshot.records, **_audit_times(run, time.monotonic() - started)}


def incremental_audit(spark, settings: Settings, target: Target, new_events: int) -> dict:
    """The scheduled audit between full ones: extend the last verified run by ``new_events`` the stream consumed."""
    from spark_apps.audit.auditor import audit

    started = time.monotonic()
    run = audit(spark, settings, target, kind="incremental")
    return {"log_events": run.snapshot.records, "new_events": new_events, "builds_on": run.builds_on,
            **_audit_times(run, time.monotonic() - started)}


def _audit_times(run, total: float) -> dict:
    """An audit run's verdict and where its time went."""
    return {"exact_match": run.success, "seconds": round(total, 2),
            "phases_s": {k: round(v, 2) for k, v in run.seconds.items()},
            "per_table_compare_s": {v.table.label: round(v.diff.seconds, 2) for v in run.verdicts}}


def compaction(spark, settings: Settings, target: Target) -> dict:
    """One run of compaction over the store, as its DAG runs it: what it folded and how long it took."""
    from spark_apps.stream.compaction import compact

    started = time.monotonic()
    done = compact(spark, settings, target)
    return {"seconds": round(time.monotonic() - started, 2),
            "tables": [_compaction_of(c) for c in done]}


READ_REPEATS = 5
# Untimed reads of each query before its timed ones. The JVM compiles Spark's planning and Delta's scan code over
# the first twenty or so runs of a query: the same tail of 45 micro-batches, read three rounds of seven times in a
# row, gave a full scan of `merchant_revenue` p50s of 0.86 s, 0.50 s and 0.38 s. Without them the tail, read first,
# was timed cold and the compacted store, read after it, warm.
READ_WARM_UPS = 10


def _read_times(spark, settings: Settings, target: Target) -> dict:
    """Per gold view: p50 seconds of a one-key query (the key of its first row) and of a full scan (every row
    computed, none collected), over ``READ_REPEATS`` runs each after ``READ_WARM_UPS`` untimed ones."""
    from pyspark.sql import functions as F

    found = {}
    for gold in target.pipeline.gold_tables:
        name = target.tables.gold(gold.name)
        first = read_view(spark, settings, target, name).select(*gold.primary_keys).first()
        condition = None
        for key in gold.primary_keys:
            same = F.col(key) == F.lit(first[key])
            condition = same if condition is None else condition & same
        one, full = [], []
        for attempt in range(READ_WARM_UPS + READ_REPEATS):
            started = time.monotonic()
            read_view(spark, settings, target, name).where(condition).collect()
            one_s = time.monotonic() - started
            started = time.monotonic()
            read_view(spark, settings, target, name).write.format("noop").mode("overwrite").save()
            if attempt >= READ_WARM_UPS:
                one.append(one_s)
                full.append(time.monotonic() - started)
        found[name] = {"one_key_s": stats.percentiles(one, (50,))["p50"],
                       "full_scan_s": stats.percentiles(full, (50,))["p50"]}
    return found


def serving_reads(spark, settings: Settings, target: Target) -> dict:
    """Read cost of the gold views with the tail the stream appended since the last compaction, then just after
    compacting it: the same queries, the same rows."""
    from spark_apps.transforms.store import KIND

    store = table_path(settings, target.tables.store)
    tail = {r[KIND]: r["rows"] for r in spark.sql(
        f"SELECT {KIND}, count(*) AS rows FROM delta.`{store}` WHERE {KIND} LIKE 'gold.%' AND NOT _reset "
        f"GROUP BY {KIND}").collect()}
    uncompacted = _read_times(spark, settings, target)
    compacted_by = compaction(spark, settings, target)
    compacted = _read_times(spark, settings, target)
    ratios = [uncompacted[t]["full_scan_s"] / compacted[t]["full_scan_s"] for t in compacted
              if compacted[t]["full_scan_s"]]
    return {"tail_partial_rows": tail, "uncompacted": uncompacted, "compaction": compacted_by,
            "compacted": compacted,
            "one_key_max_s": max(max(v["one_key_s"] for v in uncompacted.values()),
                                 max(v["one_key_s"] for v in compacted.values())),
            "full_scan_ratio_max": round(max(ratios, default=0), 2)}


# A row of the file the producer's measure sends: an order of the marketplace with a long free-text column, as
# exports of real systems have (the parser ignores a column it does not know).
_FILE_HEADER = ("event_id,event_type,event_time,schema_version,order_id,customer_id,merchant_id,amount_cents,"
                "currency,item_count,note\n")
_NOTE = "a customer note as shop exports carry them, " * 6


def write_events_file(path: Path, size_bytes: int) -> int:
    """A CSV of order events of at least ``size_bytes``, dated now; returns its rows."""
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    rows = 0
    with open(path, "w") as out:
        out.write(_FILE_HEADER)
        while out.tell() < size_bytes:
            out.write("".join(f"f{n},order_placed,{at},1,o{n},c{n % 997},m{n % 31},{n % 10_000},EUR,{n % 5 + 1},"
                              f"\"{_NOTE}{n}\"\n" for n in range(rows, rows + 10_000)))
            rows += 10_000
    return rows


def file_producer(settings: Settings, size_bytes: int) -> dict:
    """`kappa produce --file`'s reader and producer in a process of their own, sending a CSV of ``size_bytes`` to
    a topic of its own: records/s, MB/s and the process's peak memory (the file is read a chunk at a time, so the
    peak shows what the producer holds per record)."""
    import json
    import os
    import subprocess
    import sys

    topic = ensure_topic(settings, "bench.file").name
    path = settings.home / "bench-events.csv"
    rows = write_events_file(path, size_bytes)
    done = subprocess.run([sys.executable, "-m", "bench.file_producer", str(path), topic],
                          env={**os.environ, **settings.as_env()}, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PlatformError(f"the file producer failed: {done.stderr.strip()[-500:]}")
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    size = path.stat().st_size
    path.unlink()
    return {"file_bytes": size, "rows": rows, **measured,
            "mb_per_s": round(size / 1e6 / measured["seconds"], 1)}


def status_answer(spark, settings: Settings, target: Target, runs: int = 1000, per_commit: int = 10,
                  tries: int = 3) -> dict:
    """Seconds `kappa status` takes, as on-call runs it (its own process, with Airflow running beside the broker
    and the catalog), over a ledger of ``runs`` more reconciliation runs of the pipeline, appended ``per_commit``
    runs a commit: the slowest of ``tries``. Airflow that cannot start is said, and status is timed without it."""
    import datetime as dt
    import os
    import subprocess
    import sys

    from spark_apps.audit import ledger
    from spark_apps.services import airflow_standalone

    tables = [target.tables.gold(g.name) for g in target.pipeline.gold_tables]
    now = dt.datetime.now()
    for first in range(0, runs, per_commit):
        rows = []
        for run in range(first, first + per_commit):
            at = now - dt.timedelta(minutes=runs - run)
            rows += [ledger.LedgerRow(
                run_id=f"bench_status.{run:05d}", pipeline=target.name, table=table, started_at=at, finished_at=at,
                stream_table=table, stream_version=run, stream_app_id="bench", stream_batch_id=run,
                topic=target.topic, start_offsets={0: 0}, end_offsets={0: run}, snapshot_table=f"batch.{table}",
                snapshot_version=run, stream_rows=run, batch_rows=run, matched=run, missing_in_stream=0,
                extra_in_stream=0, value_mismatch=0, buckets=1, differing_buckets=0, compare_seconds=0.1,
                stream_equals_batch=True, quality_ok=True, success=True, gx_result="", detail="", code_version="",
                as_of=at) for table in tables]
        ledger.append(spark, settings, rows)
    try:
        airflow = f"running at {airflow_standalone.start(settings).url}"
    except PlatformError as exc:
        airflow = f"not running: {exc}"
    seconds = []
    try:
        for _ in range(tries):
            started = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "spark_apps.cli", "status"],
                                  env={**os.environ, **settings.as_env()}, capture_output=True, text=True,
                                  check=False)
            seconds.append(round(time.monotonic() - started, 2))
            if done.returncode not in (0, 1, 3):
                raise PlatformError(f"kappa status failed: {done.stderr.strip()[-500:]}")
    finally:
        airflow_standalone.stop(settings)
    return {"ledger_runs_added": runs, "ledger_commits_added": runs // per_commit, "seconds": max(seconds),
            "tries": seconds, "airflow": airflow, "exit_code": done.returncode}



STORAGE_TOPIC = "bench.storage"
# Micro-batches of the storage comparison: enough of them for a median, each the size of a busy stream's batch.
STORAGE_BATCH_RECORDS = 5_000


def storage_comparison(spark, settings: Settings, events: int, clock: EventClock, server) -> dict:
    """The same log of ``events`` streamed, audited in full and read, with the warehouse and checkpoints on local
    disk, then in a bucket of the embedded S3-compatible server: what object storage costs on one machine. A first
    pass on local disk, not counted, warms the JVM up for both (the first run of a query compiles its code)."""
    from spark_apps.io.spark_session import get_spark
    from spark_apps.io.topics import ensure_topic
    from spark_apps.target.resolution import declared

    home = settings.home / "storage"
    server.create_bucket("kappa-bench")
    base = settings.with_overrides(events_topic=STORAGE_TOPIC, max_offsets_per_trigger=STORAGE_BATCH_RECORDS)
    backends = {
        "warm-up": base.with_overrides(warehouse_dir=home / "warm-up" / "warehouse",
                                       checkpoint_root=home / "warm-up" / "checkpoints"),
        "local": base.with_overrides(warehouse_dir=home / "warehouse", checkpoint_root=home / "checkpoints"),
        "s3": base.with_overrides(s3_endpoint=server.endpoint, warehouse_dir="s3a://kappa-bench/warehouse",
                                  checkpoint_root="s3a://kappa-bench/checkpoints")}
    ensure_topic(base)
    produced = produce_events(base, declared(base).pipeline, events, seed=201, clock=clock)
    found: dict = {"events": produced["records"], "batch_records": STORAGE_BATCH_RECORDS, "endpoint": server.endpoint}
    for name, backend in backends.items():
        get_spark(backend)
        target = declared(backend)
        stream = platform_stream(spark, backend, target)
        audit = recompute_and_reconcile(spark, backend, target)
        reads = _read_times(spark, backend, target)
        if name == "warm-up":
            continue
        found[name] = {
            "stream_records_per_s": stream["records_per_s"], "stream_seconds": stream["seconds"],
            "batches": stream["batches"], "batch_p50_s": stream["batch_duration_s"].get("p50"),
            "full_audit_s": audit["seconds"], "exact_match": audit["exact_match"],
            "one_key_p50_s": max(r["one_key_s"] for r in reads.values()),
            "full_scan_p50_s": max(r["full_scan_s"] for r in reads.values()), "reads": reads}
    return found
