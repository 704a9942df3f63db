"""`make bench`: on one broker and one Spark session of its own, the same records through the Python producer,
a raw Kafka read, the plain append that is this machine's limit and the platform's stream; then latency at fixed
rates, recompute + reconciliation per size, and micro-batch cost against table size; ``bench/results/bench.json``
and ``bench.html``."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import platform
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

from bench import stats
from bench.page import render
from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import PROJECT_ROOT, Settings
from spark_apps.services.processes import free_port

RESULTS = PROJECT_ROOT / "bench" / "results"
log = logging.getLogger("bench")


def _positive_ints(text: str) -> list[int]:
    try:
        values = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected numbers above 0, got {text!r}")
    return values


# What a run measures unless told otherwise: the full run, and ``--quick``'s short one (one size, one rate).
FULL = {"sizes": [250_000, 1_000_000], "rates": [1000, 5000], "latency_seconds": 60, "new_events": 100_000,
        "file_mib": 1024, "storage_events": 200_000}
QUICK = {"sizes": [200_000], "rates": [1000], "latency_seconds": 60, "new_events": 20_000, "file_mib": 100,
         "storage_events": 50_000}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="make bench", description=__doc__)
    parser.add_argument("--quick", action="store_true",
                        help=f"a short run: sizes {QUICK['sizes'][0]:,}, latency at {QUICK['rates'][0]:,}/s for "
                             f"{QUICK['latency_seconds']}s (about 10 minutes on 2 cores); --sizes, --rates and "
                             "--latency-seconds still override it")
    parser.add_argument("--sizes", type=_positive_ints, default=None,
                        help=f"log sizes (events) at which to stream, recompute and reconcile, ascending "
                             f"(default {','.join(map(str, FULL['sizes']))})")
    parser.add_argument("--rates", type=_positive_ints, default=None,
                        help=f"input rates (events/s) for the end-to-end latency runs "
                             f"(default {','.join(map(str, FULL['rates']))})")
    parser.add_argument("--latency-seconds", type=int, default=None,
                        help=f"how long each latency run produces (default {FULL['latency_seconds']})")
    parser.add_argument("--new-events", type=int, default=None,
                        help=f"after each size's full audit, this many new events for an incremental audit "
                             f"(default {FULL['new_events']:,}; --quick {QUICK['new_events']:,})")
    parser.add_argument("--file-mib", type=int, default=None,
                        help=f"size of the CSV file `kappa produce --file` sends for its throughput and peak memory "
                             f"(default {FULL['file_mib']:,} MiB; --quick {QUICK['file_mib']:,})")
    parser.add_argument("--storage-events", type=int, default=None,
                        help=f"a log of this many events streamed, audited and read with the warehouse on local disk, "
                             f"then on the embedded S3-compatible server (default {FULL['storage_events']:,}; "
                             f"--quick {QUICK['storage_events']:,}; 0 skips it)")
    parser.add_argument("--only-storage", action="store_true",
                        help="run only the local disk against object storage comparison")
    parser.add_argument("--batch", type=int, default=Settings().max_offsets_per_trigger,
                        help="maxOffsetsPerTrigger of the limit and the platform (default: the platform's setting)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for bench.json and bench.html")
    args = parser.parse_args(argv)
    for name, value in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.sizes != sorted(set(args.sizes)):
        parser.error("--sizes must be ascending and distinct")
    if args.latency_seconds <= 0 or args.batch <= 0:
        parser.error("--latency-seconds and --batch must be above 0")
    if args.storage_events < 0 or (args.only_storage and not args.storage_events):
        parser.error("--storage-events must be at least 0, and above 0 with --only-storage")
    return args


def batch_summaries(doc: dict) -> dict:
    """``jobs_per_batch`` and ``commits_per_batch`` over the platform's catch-up batches of every size, and
    ``batch_cost_growth`` over the micro-batches of one size run over small and over large tables
    (``same_size_batches``). ``every_batch`` places the catch-up and latency micro-batches at the table size each
    ran over, in the order they ran (all of them append to the same tables, so a batch's table size is the records
    of the batches before it). It is for the chart only: those batches hold different numbers of records, so their
    seconds do not compare across sizes."""
    catch_up = [b for size in doc.get("sizes", []) for b in (size.get("stream") or {}).get("per_batch", [])]
    every = catch_up + [b for run in doc.get("latency", []) for b in run.get("per_batch", [])]
    same_size = doc.get("same_size_batches") or []
    return {"jobs_per_batch": stats.per_batch({i: b["jobs"] for i, b in enumerate(catch_up)
                                               if b.get("jobs") is not None}),
            "commits_per_batch": stats.per_batch({i: b["commits"] for i, b in enumerate(catch_up)
                                                  if b.get("commits") is not None}),
            "batch_cost_growth": {**stats.batch_cost_growth(same_size), "points": same_size,
                                  "every_batch": stats.table_size_points(every)}}


def machine_facts(spark) -> dict:
    memory_kb = next((int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                      if line.startswith("MemTotal")), 0)
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    return {"cores": os.cpu_count(), "memory_gib": round(memory_kb / 2**20, 1), "cpu": cpu,
            "os": platform.platform(), "python": platform.python_version(), "java": java[0] if java else "?",
            "spark": spark.version, "delta": version("delta-spark"),
            "spark_master": spark.conf.get("spark.master"), "driver_memory": spark.conf.get("spark.driver.memory"),
            "load_at_start": round(os.getloadavg()[0], 2)}


class Run:
    """The results document, rewritten after every step so an interrupted run keeps what it measured."""

    def __init__(self, out: Path, steps: int) -> None:
        self.out, self.steps, self.step = out, steps, 0
        self.doc: dict = {"measured_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "sizes": []}

    def begin(self, what: str) -> None:
        self.step += 1
        log.info("[%d/%d] %s", self.step, self.steps, what)

    def save(self) -> None:
        self.doc.update(batch_summaries(self.doc))
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "bench.json").write_text(json.dumps(self.doc, indent=2) + "\n")
        (self.out / "bench.html").write_text(render(self.doc))


def measure(args: argparse.Namespace, settings: Settings, run: Run, object_store) -> None:
    from bench import measures
    from spark_apps.io.spark_session import get_spark
    from spark_apps.io.topics import ensure_topic
    from spark_apps.target.resolution import declared

    target = declared(settings)
    pipeline = target.pipeline
    pipeline.require_generator("the benchmark (it produces the pipeline's synthetic events)")
    ensure_topic(settings)
    spark = get_spark(settings, "kappa-bench")
    doc = run.doc
    doc["machine"] = machine_facts(spark)
    doc["quick"] = args.quick
    doc["settings"] = {"topic_partitions": settings.topic_partitions, "max_offsets_per_trigger": args.batch,
                       "shuffle_partitions": settings.spark_shuffle_partitions,
                       "trigger_interval_s": settings.trigger_interval_s}
    produced = 0
    clock = measures.EventClock()
    if args.storage_events:
        run.begin(f"{args.storage_events:,} events streamed, audited and read on local disk, then on the S3 server")
        doc["storage"] = measures.storage_comparison(spark, settings, args.storage_events, clock, object_store)
        run.save()
    if args.only_storage:
        return
    for index, size in enumerate(args.sizes):
        entry: dict = {"events": size}
        doc["sizes"].append(entry)
        run.begin(f"producing {size - produced:,} events (log size {size:,}) from Python")
        entry["produced"] = measures.produce_events(settings, pipeline, size - produced, seed=11 + index,
                                                    clock=clock)
        produced = size
        if index == 0:
            doc["producer"] = entry["produced"]
            run.begin("raw Kafka read of the whole log by Spark")
            doc["raw_kafka_read"] = measures.raw_kafka_read(spark, settings)
            run.begin("the limit: plain Kafka -> Parquet streaming append")
            doc["limit"] = measures.plain_append_limit(spark, settings, settings.home / "limit")
            run.save()
        run.begin(f"the platform's stream catching up to {size:,} events")
        entry["stream"] = measures.platform_stream(spark, settings, target)
        if index == 0:
            doc["platform"] = entry["stream"]
            doc["platform_to_limit"] = round(doc["platform"]["records_per_s"] / doc["limit"]["records_per_s"], 3)
        run.save()
        run.begin(f"batch recompute and reconciliation at {size:,} events")
        entry["recompute_and_reconcile"] = measures.recompute_and_reconcile(spark, settings, target)
        doc["growth"] = stats.growth({s["events"]: s["recompute_and_reconcile"]["seconds"] for s in doc["sizes"]})
        doc["audit"] = stats.audit_figures(doc["sizes"])
        run.save()
        run.begin(f"incremental audit of {args.new_events:,} new events over the log of {size:,}")
        measures.produce_events(settings, pipeline, args.new_events, seed=51 + index, clock=clock)
        produced += args.new_events
        measures.platform_stream(spark, settings, target)
        entry["incremental_audit"] = measures.incremental_audit(spark, settings, target, args.new_events)
        extended = [s["incremental_audit"] for s in doc["sizes"] if s.get("incremental_audit")]
        doc["incremental_growth"] = stats.growth({e["log_events"]: e["seconds"] for e in extended})
        doc["audit"] = stats.audit_figures(doc["sizes"])
        run.save()
    run.begin("compaction of the store, as its DAG runs it before the latency runs")
    doc["compaction"] = measures.compaction(spark, settings, target)
    run.save()
    doc["latency"] = []
    for index, rate in enumerate(args.rates):
        run.begin(f"end-to-end latency at {rate:,} events/s for {args.latency_seconds}s, continuous trigger")
        doc["latency"].append(measures.end_to_end_latency(spark, settings, target, rate, args.latency_seconds,
                                                          seed=101 + index, clock=clock))
        run.save()
    run.begin("serving reads with the latency runs' tail uncompacted, then compacted")
    doc["serving_reads"] = measures.serving_reads(spark, settings, target)
    run.save()
    run.begin(f"micro-batches of {measures.SAME_SIZE_BATCH_RECORDS:,} records over the run's tables and over "
              f"tables of {measures.SMALL_TABLE_EVENTS:,} rows")
    doc["same_size_batches"] = measures.batch_cost_by_table_size(spark, settings, target, clock)
    run.save()
    run.begin(f"`kappa produce --file` of a {args.file_mib:,} MiB CSV, in a process of its own")
    doc["file_producer"] = measures.file_producer(settings, args.file_mib * 2**20)
    run.save()
    run.begin("`kappa status` over a ledger of 1,000 more runs, in a process of its own, with Airflow running")
    doc["status"] = measures.status_answer(spark, settings, target)
    run.save()
    doc["machine"]["load_at_end"] = round(os.getloadavg()[0], 2)
    run.save()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    for noisy in ("py4j", "kafka", "great_expectations"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from spark_apps.services.broker import EmbeddedBroker
    from spark_apps.services.catalog_server import CatalogServer
    from spark_apps.services.object_store import ObjectStoreServer

    home = PROJECT_ROOT / "var" / "bench" / f"run-{int(time.time())}"
    jars = PROJECT_ROOT / "var" / "jars"
    settings = Settings(home=home, spark_jars_dir=jars / "spark", kafka_jars_dir=jars / "kafka",
                        kafka_port=free_port(), kafka_controller_port=free_port(), catalog_port=free_port(),
                        airflow_port=free_port(), airflow_log_server_port=free_port(), s3_port=free_port(),
                        spark_driver_memory="6g",
                        max_offsets_per_trigger=args.batch)
    steps = (len(args.sizes) * 4 + 2 + len(args.rates) + 5) * (not args.only_storage) + bool(args.storage_events)
    run = Run(args.out, steps=steps)
    broker = EmbeddedBroker(settings, stop_with_parent=True)
    catalog = CatalogServer(settings, stop_with_parent=True)
    object_store = ObjectStoreServer(settings, stop_with_parent=True)
    try:
        broker.start()
        catalog.start()
        if args.storage_events:
            object_store.start()
        measure(args, settings, run, object_store)
    except PlatformError as error:
        print(f"make bench: error: {error}", file=sys.stderr)
        return 1
    finally:
        broker.stop()
        catalog.stop()
        object_store.stop()
    print(f"results: {args.out / 'bench.json'}; page: {args.out / 'bench.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
