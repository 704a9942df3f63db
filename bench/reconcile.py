"""Benchmark: recompute and reconcile N events (default 1,000,000), split into read, compute, write, compare.

Runs on its own broker (free ports) and home under ``var/bench``; writes ``bench/results/reconcile.json``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from pathlib import Path

from spark_apps.settings import PROJECT_ROOT, Settings

RESULTS = PROJECT_ROOT / "bench" / "results" / "reconcile.json"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> int:
    from spark_apps.auditor import audit
    from spark_apps.broker import EmbeddedBroker
    from spark_apps.marketplace.generator import GeneratorConfig
    from spark_apps.marketplace.pipeline import PIPELINE
    from spark_apps.producer import produce
    from spark_apps.spark_session import get_spark
    from spark_apps.streaming import StreamJob
    from spark_apps.topics import ensure_topic

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    for noisy in ("py4j", "kafka", "great_expectations"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    events = int(os.environ.get("BENCH_EVENTS", "1000000"))
    home = Path(os.environ.get("BENCH_HOME", PROJECT_ROOT / "var" / "bench" / f"reconcile-{int(time.time())}"))
    jars = PROJECT_ROOT / "var" / "jars"
    settings = Settings(home=home, spark_jars_dir=jars / "spark", kafka_jars_dir=jars / "kafka",
                        kafka_port=free_port(), kafka_controller_port=free_port(), spark_driver_memory="6g",
                        max_offsets_per_trigger=int(os.environ.get("BENCH_BATCH", "250000")))
    broker = EmbeddedBroker(settings, stop_with_parent=True)
    broker.start()
    try:
        ensure_topic(settings)
        started = time.monotonic()
        config = GeneratorConfig(seed=11, total_events=events, base_time_ms=int(time.time()) * 1000,
                                 allowed_lateness_s=settings.allowed_lateness_s)
        produce(settings, config)
        produce_s = time.monotonic() - started
        spark = get_spark(settings, "kappa-bench-reconcile")
        started = time.monotonic()
        batches = StreamJob(spark, settings, PIPELINE).run(until_caught_up=True)
        stream_s = time.monotonic() - started
        started = time.monotonic()
        run = audit(spark, settings, PIPELINE)
        audit_s = time.monotonic() - started
        result = {
            "events": events, "records": run.snapshot.records, "exact_match": run.success,
            "produce_s": round(produce_s, 1), "stream_s": round(stream_s, 1), "stream_batches": len(batches),
            "audit_total_s": round(audit_s, 1), "audit_phases_s": {k: round(v, 1) for k, v in run.seconds.items()},
            "per_table_compare_s": {v.table.label: round(v.diff.seconds, 1) for v in run.verdicts},
            "cores": os.cpu_count(), "driver_memory": settings.spark_driver_memory,
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
        print(f"written to {RESULTS}; report {run.report_path}")
        return 0 if run.success else 1
    finally:
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())
