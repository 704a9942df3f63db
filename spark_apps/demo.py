"""``make demo``: the platform end to end on the embedded setup, narrated step by step."""

from __future__ import annotations

import time

from spark_apps.core.settings import Settings

DEMO_EVENTS = 20_000
# Simulated event-time rate: 20,000 events then span about eight minutes, so several windows.
DEMO_EVENT_TIME_RATE = 40.0


def _step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def _compare_with_manifest(spark, tables, manifest) -> None:
    """On a first run the tables hold exactly this run's records: check them against the ground truth."""
    expected = {
        tables.bronze: manifest.total_records,
        tables.dead_letters: len(manifest.malformed),
        tables.events: len(manifest.valid_events) + len(manifest.late_events),
        tables.late_events: len(manifest.late_events),
        tables.duplicates: len(manifest.duplicates) + len(manifest.conflicts),
    }
    for name, want in expected.items():
        got = spark.table(name).count()
        print(f"{name:32s} {got:>10,} rows, manifest says {want:>10,}: {'match' if got == want else 'MISMATCH'}")


def run_demo(settings: Settings) -> int:
    from spark_apps.audit.report import write_report
    from spark_apps.core.paths import dbt_docs_index, heartbeat_path
    from spark_apps.io.catalog import table_path
    from spark_apps.io.lineage import position_at
    from spark_apps.io.producer import produce
    from spark_apps.io.spark_session import get_spark
    from spark_apps.io.topics import ensure_topic, partition_offsets
    from spark_apps.ops.overview import write_overview
    from spark_apps.ops.scheduled_audit import reconcile
    from spark_apps.pipeline.synthetic import GeneratorRequest
    from spark_apps.services.broker import EmbeddedBroker
    from spark_apps.services.catalog_server import CatalogServer
    from spark_apps.services.object_store import ObjectStoreServer, embedded_buckets
    from spark_apps.serving.dbt_runner import run_action
    from spark_apps.stream.job import StreamJob
    from spark_apps.target import generations
    from spark_apps.target.resolution import active_of, declared

    _step(f"starting the embedded Kafka broker (KRaft) on {settings.kafka_bootstrap_servers}")
    broker = EmbeddedBroker(settings)
    broker.start()
    print(f"broker pid {broker.pid()}, data in {broker.paths.data_dir}")
    _step(f"starting the catalog database (Hive metastore on Derby) on {settings.catalog_host}:"
          f"{settings.catalog_port}")
    catalog = CatalogServer(settings)
    catalog.start()
    print(f"catalog pid {catalog.pid()}, data in {catalog.paths.database_dir}")
    buckets = embedded_buckets(settings)
    if buckets:
        _step(f"starting the S3-compatible server (S3Proxy) on {settings.s3_endpoint}: the warehouse is "
              f"{settings.warehouse_dir}")
        server = ObjectStoreServer(settings)
        server.start()
        for bucket in buckets:
            server.create_bucket(bucket)
        print(f"S3 server pid {server.pid()}, buckets in {server.paths.buckets_dir}")

    given = declared(settings)
    pipeline = given.pipeline
    topic = ensure_topic(settings, given.topic).name
    # A new seed per run (the log size so far), so a second demo adds new events instead of conflicts.
    seed = sum(end for _, end in partition_offsets(settings, topic).values())
    _step(f"producing {DEMO_EVENTS:,} marketplace events (seed {seed}) with every hard case into {topic}")
    request = GeneratorRequest(seed=seed, events=DEMO_EVENTS, base_time_ms=int(time.time()) * 1000,
                               events_per_second=DEMO_EVENT_TIME_RATE,
                               allowed_lateness_s=given.lateness.allowed_s)
    manifest_path = settings.home / "manifests" / f"{topic}-seed{seed}.json"
    result = produce(settings, pipeline, request, topic=topic, manifest_path=manifest_path)
    print(result.summary(topic, manifest_path))

    _step("running the Kappa stream until it has caught up with the log")
    spark = get_spark(settings, app_name="kappa-demo")
    target = active_of(settings, given, generations.read(spark, settings, given.name))
    pipeline = target.pipeline
    job = StreamJob(spark, settings, target)
    stats = job.run(until_caught_up=True, heartbeat=heartbeat_path(settings, target.name))
    for batch in stats:
        print(f"batch {batch.batch_id}: {batch.records:,} records ({batch.dead_letters:,} dead letters) "
              f"in {batch.duration_s:.1f}s")

    _step("what the stream tables hold")
    tables = target.tables
    for name in pipeline.stream_table_names(target.generation, commit_log=False):
        print(f"{name:32s} {spark.table(name).count():>10,} rows")
    reasons = spark.table(tables.dead_letters).groupBy("reason").count().orderBy("reason").collect()
    print("dead letters by reason: " + ", ".join(f"{r['reason']}={r['count']}" for r in reasons))
    if stats and stats[0].batch_id == 0:
        _compare_with_manifest(spark, tables, result.manifest)

    _step("offset lineage: the log prefix the store's newest version reflects (every stream table is a view of it)")
    print(f"{tables.store}: {position_at(table_path(settings, tables.store)).describe()}")
    spark.table(tables.gold(pipeline.gold_tables[0].name)).orderBy("net_cents", ascending=False).show(5)

    _step("Lambda audit: recompute every table from Kafka [start, O) (a rerun of the same code extends the last "
          "verified run by the new records instead) and reconcile it with the stream")
    reconciled = reconcile(spark, settings, target, serve=True, kind="auto")
    run = reconciled.reconciliation
    print("\n".join(run.lines))
    print(f"\nVerdict: {'the stream equals the batch, exactly' if run.success else 'MISMATCH, see the report'}")

    _step("serving: which copy of each gold table readers get (kappa after "
          f"{settings.serving_exact_runs} exact audits over {settings.serving_min_span_s}s)")
    for decision in reconciled.decisions:
        print(f"{decision.view}: {decision.mode} -> {decision.source_table}; {decision.reason}")

    _step("dbt build: staging views, Delta marts, their data tests and unit tests over the serving views")
    built = run_action(spark, settings, pipeline, "build")
    print(f"dbt build: {'ok' if built.success else 'FAILED'} "
          f"({', '.join(f'{n} {status}' for status, n in sorted(built.counts().items()))})")
    for view, source in built.served.items():
        print(f"{view} read from {source}")
    if built.success:
        spark.table("marts.merchant_daily_revenue").orderBy("net_cents", ascending=False).show(5, truncate=False)
    documented = run_action(spark, settings, pipeline, "docs")
    report = write_report(settings, run.run)  # again, now that it can link the dbt docs
    print(f"\nreconciliation report: {report}")
    if documented.success:
        print(f"dbt docs (linked from the report): {dbt_docs_index(settings, pipeline.name)}")
    overview = write_overview(spark, settings, target)  # the dbt run's incidents, if any, in it too
    print(f"\nThe broker, the catalog{' and the S3 server' if buckets else ''} keep running (make down stops them). "
          f"Warehouse: {settings.warehouse_dir}")
    print(f"overview of {pipeline.name} over time (verdicts, audits, lag and latency, serving, incidents): "
          f"{overview}")
    return 0 if run.success and built.success else 1
