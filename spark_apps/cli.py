"""``kappa``: the command line of the platform.

Every failure the user can act on ends as one line on stderr and a non-zero exit code.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from spark_apps.core.errors import PlatformError
from spark_apps.core.paths import dbt_docs_index, dbt_log, heartbeat_path
from spark_apps.core.settings import Settings

if TYPE_CHECKING:
    from spark_apps.pipeline.target import Target

EXIT_USAGE = 2
EXIT_FAILED = 1


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line plus a hint, not the whole usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def _broker(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.services.broker import EmbeddedBroker

    broker = EmbeddedBroker(settings)
    if args.action == "start":
        broker.start()
        print(f"kafka broker running on {broker.bootstrap_servers} (pid {broker.pid()}, "
              f"data {broker.paths.data_dir}, logs {broker.paths.log_dir})")
    elif args.action == "stop":
        print("kafka broker stopped" if broker.stop() else "kafka broker was not running")
    else:
        pid = broker.pid()
        if pid:
            print(f"kafka broker running on {broker.bootstrap_servers} (pid {pid})")
        elif broker.answers():
            print(f"a kafka broker answers on {broker.bootstrap_servers}, started from another home than "
                  f"{settings.home} (`kappa broker stop` stops only brokers this home started)")
        else:
            print(f"kafka broker is not running on {broker.bootstrap_servers}")
            return EXIT_FAILED
    return 0


def _s3(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.services.object_store import ObjectStoreServer, embedded_buckets

    server = ObjectStoreServer(settings)
    if args.action == "up":
        buckets = embedded_buckets(settings)
        if not buckets:
            print("no location of these settings is on the embedded S3-compatible server "
                  f"(KAPPA_S3_ENDPOINT={server.endpoint} and an s3a:// warehouse or checkpoint root); not started")
            return 0
        server.start()
        for bucket in buckets:
            server.create_bucket(bucket)
        print(f"S3-compatible server running on {server.endpoint} (pid {server.pid()}) with bucket(s) "
              f"{', '.join(buckets)}")
    elif args.action == "start":
        server.start()
        print(f"S3-compatible server running on {server.endpoint} (pid {server.pid()}, buckets in "
              f"{server.paths.buckets_dir}); point s3a:// paths at it with KAPPA_S3_ENDPOINT={server.endpoint}")
    elif args.action == "stop":
        print("S3-compatible server stopped" if server.stop() else "S3-compatible server was not running")
    elif args.action == "create-bucket":
        if not args.bucket:
            raise PlatformError("create-bucket needs the bucket's name")
        server.create_bucket(args.bucket)
        print(f"bucket {args.bucket} ready at {server.endpoint}")
    elif server.pid():
        print(f"S3-compatible server running on {server.endpoint} (pid {server.pid()})")
    else:
        print(f"S3-compatible server is not running on {server.endpoint}")
        return EXIT_FAILED
    return 0


def _catalog(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.services.catalog_server import CatalogServer

    server = CatalogServer(settings)
    if args.action == "start":
        server.start()
        print(f"catalog database running on {server.address} (pid {server.pid()}, data {server.paths.database_dir})")
    elif args.action == "stop":
        print("catalog database stopped" if server.stop() else "catalog database was not running")
    elif args.action == "sync":
        from spark_apps.io.catalog import register_warehouse_tables
        from spark_apps.io.stream_store import register_views, stored_layout
        from spark_apps.serving import state as serving
        from spark_apps.target import generations
        from spark_apps.target.resolution import active_of

        given = _declared(args, settings)
        spark = _spark(settings, "catalog-sync", given.name)
        found = register_warehouse_tables(spark, settings)
        print(f"{len(found)} tables of {settings.warehouse_dir} registered: {', '.join(found) or 'none'}")
        target = active_of(settings, given, generations.read(spark, settings, given.name))
        if target.tables.store in found:
            views = register_views(spark, settings, target, stored_layout(spark, settings, target))
            print(f"views {', '.join(views)} pointed at {target.tables.store}")
        views = serving.register_views(spark, settings, given.pipeline)
        print(f"{len(views)} serving views of {given.name} pointed at their cut")
    elif server.pid():
        print(f"catalog database running on {server.address} (pid {server.pid()})")
    elif server.answers():
        print(f"a catalog database answers on {server.address}, started from another home than {settings.home}")
    else:
        print(f"catalog database is not running on {server.address}")
        return EXIT_FAILED
    return 0


def _sql(args: argparse.Namespace, settings: Settings) -> int:
    import subprocess

    from spark_apps.io.spark_session import sql_endpoint_conf
    from spark_apps.services.sql_endpoint import SqlEndpoint, beeline_command, jdbc_url

    if args.beeline_args and args.action != "beeline":
        raise PlatformError(f"sql {args.action} takes no arguments, got {' '.join(args.beeline_args)!r} (only "
                            "beeline passes its arguments on)")
    endpoint = SqlEndpoint(settings)
    if args.action == "start":
        endpoint.start(sql_endpoint_conf(settings))
        print(f"SQL endpoint running: {jdbc_url(settings)} (pid {endpoint.pid()}, log {endpoint.log_file}); "
              "connect with `kappa sql beeline`")
    elif args.action == "stop":
        print("SQL endpoint stopped" if endpoint.stop() else "SQL endpoint was not running")
    elif args.action == "beeline":
        if not endpoint.answers():
            raise PlatformError(f"no SQL endpoint answers on {endpoint.address}; start it with `make sql`")
        return subprocess.run(beeline_command(settings, *args.beeline_args), check=False).returncode
    elif endpoint.answers():
        print(f"SQL endpoint running: {jdbc_url(settings)}" + (f" (pid {endpoint.pid()})" if endpoint.pid() else ""))
    else:
        print(f"SQL endpoint is not running on {endpoint.address}")
        return EXIT_FAILED
    return 0


def _kafka(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.services import kafka_tools

    return kafka_tools.run(settings, args.tool, args.tool_args)


def _topic(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.io.topics import ensure_topic, partition_offsets

    state = ensure_topic(settings, args.name, args.partitions)
    verb = "created" if state.created else "exists, config checked"
    offsets = partition_offsets(settings, state.name)
    spans = ", ".join(f"p{p}=[{lo},{hi})" for p, (lo, hi) in offsets.items())
    print(f"topic {state.name}: {verb}; {state.partitions} partitions; {spans}")
    return 0


def _produce(args: argparse.Namespace, settings: Settings) -> int:
    import time

    from spark_apps.io.producer import produce
    from spark_apps.io.topics import ensure_topic
    from spark_apps.pipeline.synthetic import GeneratorRequest

    target = _declared(args, settings)
    pipeline = target.pipeline
    if args.file:
        generator_only = [flag for flag, value in (("--events", args.events), ("--duration", args.duration),
                                                   ("--seed", args.seed), ("--base-time-ms", args.base_time_ms),
                                                   ("--manifest", args.manifest)) if value is not None]
        if generator_only:
            raise PlatformError(f"{', '.join(generator_only)}: options of the generator; --file sends the file's "
                                "events as they are")
        print(_produce_file(args, settings, target))
        return 0
    if args.strict or args.accept_late:
        raise PlatformError("--strict and --accept-late: options of --file")
    pipeline.require_generator(f"`kappa produce --pipeline {pipeline.name}` without --file")
    total = args.events or 10_000
    if args.duration is not None:
        if not args.rate:
            raise PlatformError("--duration needs --rate (events per second)")
        total = int(args.duration * args.rate)
    seed = 42 if args.seed is None else args.seed
    base_time_ms = args.base_time_ms if args.base_time_ms is not None else int(time.time()) * 1000
    request = GeneratorRequest(seed=seed, events=total, base_time_ms=base_time_ms, events_per_second=args.rate,
                               allowed_lateness_s=target.lateness.allowed_s)
    topic = ensure_topic(settings, args.topic or target.topic).name
    manifest = Path(args.manifest) if args.manifest else settings.home / "manifests" / f"{topic}-seed{seed}.json"
    result = produce(settings, pipeline, request, topic=topic, rate=args.rate, manifest_path=manifest)
    print(result.summary(topic, manifest))
    return 0


def _produce_file(args: argparse.Namespace, settings: Settings, target: Target) -> str:
    """Send a file (or folder) of events; the line to print says what was sent and, read back from the log by the
    stream's own parser, how many of those records it dead-letters and why."""
    import itertools
    import time

    from spark_apps.io.event_files import HISTORY_SAMPLE, event_files, late_on_arrival, read_records
    from spark_apps.io.producer import produce_file
    from spark_apps.io.topics import ensure_topic, partition_offsets
    from spark_apps.pipeline.lateness import APPEND_TIME

    files = event_files(Path(args.file))
    schema = target.pipeline.schema
    if args.strict:
        for _ in read_records(files, schema, strict=True):
            pass
    records = read_records(files, schema)
    head = list(itertools.islice(records, HISTORY_SAMPLE))
    if not head:
        raise PlatformError(f"{args.file}: holds no events")
    if target.lateness.against == APPEND_TIME and not args.accept_late:
        _refuse_history(late_on_arrival(head, schema, target.lateness, time.time()), target, args.file)
    topic = ensure_topic(settings, args.topic or target.topic).name

    def log_end() -> dict[int, int]:
        return {partition: end for partition, (_, end) in partition_offsets(settings, topic).items()}

    before = log_end()
    result = produce_file(settings, topic, itertools.chain(head, records), args.file, rate=args.rate)
    if result.interrupted:
        return result.summary(topic, None)
    return f"{result.summary(topic, None)}; {_dead_letter_forecast(settings, target, topic, before, log_end())}"


def _refuse_history(counts: tuple[int, int], target: Target, file: str) -> None:
    """Refuse a file that is mostly history under the append-time rule: every such event would be late."""
    from spark_apps.pipeline.lateness import is_history

    timed, late = counts
    if is_history(timed, late):
        raise PlatformError(
            f"{late:,} of the first {timed:,} events of {file} are more than {target.lateness.allowed_s}s older "
            f"than now: pipeline {target.name}'s lateness rule (against append_time) would flag them late, list "
            f"them in {target.tables.late_events} and keep them out of every gold table. For a history load "
            "declare Lateness(against=HIGH_WATER_MARK) in the pipeline (docs/pipelines.md, \"Late events, and "
            "loading history\"), or add --accept-late to send them as they are")


def _dead_letter_forecast(settings: Settings, target: Target, topic: str, start: dict[int, int],
                          end: dict[int, int]) -> str:
    from spark_apps.io.log_reader import dead_letters_by_reason
    from spark_apps.io.spark_session import get_spark

    try:
        spark = get_spark(settings, app_name="kappa-produce")
    except PlatformError as exc:
        return f"dead letters not counted ({exc})"
    reasons = dead_letters_by_reason(spark, settings, topic, {p: start.get(p, 0) for p in end}, end,
                                     target.pipeline.schema)
    if not reasons:
        return "the stream's parser dead-letters none of them"
    listed = ", ".join(f"{reason} {count:,}" for reason, count in sorted(reasons.items(), key=lambda r: (-r[1], r[0])))
    return f"the stream's parser dead-letters {sum(reasons.values()):,} of them: {listed}"


def _stream(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.stream.job import StreamJob

    if args.reset and not args.yes:
        raise PlatformError("--reset deletes every stream table and the checkpoint; add --yes to confirm")
    spark, target = _resolved(args, settings, "stream")
    job = StreamJob(spark, settings, target)
    if args.reset:
        job.reset()
        print(f"deleted the checkpoint {target.checkpoint} and the stream tables of {target.describe()}")
    heartbeat = heartbeat_path(settings, target.name)
    stats = job.run(until_caught_up=not args.continuous, heartbeat=heartbeat)
    records = sum(s.records for s in stats)
    print(f"stream {target.describe()}: {len(stats)} micro-batches, {records:,} records; heartbeat {heartbeat}")
    return 0


def _supervise(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.ops.supervisor import status_line, stop_stream, supervise

    target = _declared(args, settings)
    if args.stop:
        stopped = stop_stream(settings, target)
        print(f"stream {target.name}: {'stopped' if stopped else 'was not running under the supervisor'}")
        return 0
    health = supervise(settings, target, start=not args.no_start)
    print(status_line(health, target.name))
    return 0 if health.healthy else EXIT_FAILED


def _status(args: argparse.Namespace, settings: Settings) -> int:
    import datetime as dt

    from spark_apps.io.spark_session import get_spark
    from spark_apps.ops.status import as_json, exit_code, render, statuses
    from spark_apps.pipeline.declaration import registered_pipelines
    from spark_apps.target.resolution import declared

    specs = args.pipeline or sorted({*registered_pipelines(), settings.pipeline})
    # One line per pipeline: the settings' spec may be a registered pipeline's module:attribute.
    targets: dict[str, Target] = {}
    for spec in specs:
        target = declared(settings, spec)
        targets.setdefault(target.name, target)
    found = statuses(settings, list(targets.values()), lambda: get_spark(settings, app_name="kappa-status"))
    print(render(found, dt.datetime.now()))
    _write_json(args.json, {"pipelines": [as_json(s) for s in found]})
    return exit_code(found)


def _lineage(args: argparse.Namespace, settings: Settings) -> int:
    """Read from the commit files of the table, or of the store a stream table is a view of: no Spark session."""
    from spark_apps.io.catalog import existing_table_path
    from spark_apps.io.lineage import position_at
    from spark_apps.pipeline.declaration import load_pipeline, registered_pipelines

    generation = args.table.rpartition("__")[2] if "__" in args.table else ""
    stores = [p.tables(generation).store
              for p in (load_pipeline(spec) for spec in sorted({*registered_pipelines(), settings.pipeline}))
              if args.table in p.stream_table_names(generation)]
    path = existing_table_path(settings, stores[0] if stores else args.table)
    print(f"{args.table} {position_at(path, args.version).describe()}")
    return 0


def _reconcile(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.ops.scheduled_audit import object_store_watched, reconcile

    if args.version is not None and args.table is None:
        raise PlatformError("--version needs --table (the stream table whose version to audit)")
    if args.as_of is not None and args.table is not None:
        raise PlatformError("--as-of and --table both choose the stream batch to audit; give one")
    only = [name.strip() for name in args.only.split(",")] if args.only else None
    given = _declared(args, settings)
    with object_store_watched(settings, given.name):
        spark, target = _active(settings, given, "reconcile")
        outcome = reconcile(spark, settings, target, run_id=args.run_id, as_of=args.as_of, if_due=args.if_due,
                            serve=args.serve, table=args.table, version=args.version, only=only, kind=args.kind)
    if outcome.reconciliation is None:
        print(f"reconcile skipped: {outcome.due.reason}")
        _write_json(args.json, outcome.as_json())
        return 0
    print("\n".join(outcome.reconciliation.lines))
    if outcome.decisions:
        print("\n".join(_serving_line(d) for d in outcome.decisions))
    if outcome.overview:
        print(f"overview: {outcome.overview}")
    _write_json(args.json, outcome.as_json())
    if not outcome.reconciliation.success:
        print(f"kappa reconcile: stream and batch differ or a quality rule failed; see {outcome.reconciliation.report}",
              file=sys.stderr)
        return EXIT_FAILED
    return 0


def _serving(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.io import serving_cut
    from spark_apps.io.spark_session import get_spark
    from spark_apps.serving import state as serving

    if args.action == "advance" and not args.run_id:
        raise PlatformError("advance needs --run-id (the reconciliation whose verdict to apply)")
    if args.action == "fallback" and not args.reason:
        raise PlatformError("fallback needs --reason (recorded with the decision)")
    spark = get_spark(settings, app_name="kappa-serving")
    if args.action == "advance":
        pipeline = _declared(args, settings).pipeline
        decisions = serving.advance(spark, settings, pipeline, args.run_id)
        print("\n".join(_serving_line(d) for d in decisions))
        _write_json(args.json, {"run_id": args.run_id, "pipeline": pipeline.name,
                                "decisions": [d.as_json() for d in decisions]})
        return 0
    if args.action == "fallback":
        decisions = serving.fall_back(spark, settings, _declared(args, settings).pipeline, args.reason)
        print("\n".join(_serving_line(d) for d in decisions) or "no gold table is served yet; nothing to do")
        _write_json(args.json, {"decisions": [d.as_json() for d in decisions]})
        return 0
    decisions = (serving.history(spark, settings, args.table) if args.action == "history"
                 else list(serving.current(spark, settings).values()))
    if not decisions:
        print("no serving decision recorded yet: every gold table is served from the batch snapshot once the "
              "first reconciliation runs")
        return 0
    print("\n".join(_serving_line(d, with_run=args.action == "history") for d in decisions))
    cuts = serving_cut.read_all(spark) if args.action != "history" else []
    for cut in cuts:
        print("\n".join(cut.describe()))
    _write_json(args.json, {"decisions": [d.as_json() for d in decisions],
                            "cuts": [{"pipeline": c.pipeline, "follows": c.follows, "basis": c.basis,
                                      "consistent": c.consistent, "end_offsets": c.end_offsets,
                                      "members": [{"table": m.table, "source": m.source, "version": m.version}
                                                  for m in c.members]} for c in cuts]})
    return 0


def _replay(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.pipeline.declaration import load_pipeline
    from spark_apps.serving import replay
    from spark_apps.target import generations

    target = _declared(args, settings)
    pipeline, spec = target.pipeline, target.spec
    if args.replay_of:
        replay.check_code_is_of(pipeline, spec, load_pipeline(args.replay_of))
    if args.generation:
        generations.check_name(args.generation)
    if args.swap and args.action not in ("start", "reconcile"):
        raise PlatformError("--swap goes with start or reconcile (swap when the reconciliation is exact)")
    if args.run_id and args.action not in ("start", "reconcile"):
        raise PlatformError("--run-id names the reconciliation of start or reconcile")
    if args.action == "rollback" and not args.reason:
        raise PlatformError("rollback needs --reason (recorded with the serving decisions)")
    spark = _spark(settings, "replay", target.name)
    outcome = replay.run_action(spark, settings, pipeline, spec, args.action, args.generation, run_id=args.run_id,
                                reason=args.reason or "", swap_after=args.swap)
    if outcome.built is not None:
        built = outcome.built
        print(f"replay {pipeline.name}: generation {built.generation} streamed from offset 0 until caught up: "
              f"{built.batches} micro-batches, {built.records:,} records; checkpoint {built.checkpoint}")
    if outcome.reconciled is not None:
        reconciled = outcome.reconciled
        print(f"replay {pipeline.name}: generation {outcome.generation} {reconciled['status']} by run "
              f"{reconciled['run_id']}; report {reconciled['report']}")
    if outcome.failed:
        _write_json(args.json, outcome.as_json())
        print(f"kappa replay: generation {outcome.generation} differs from the batch; serving is unchanged; see "
              f"{outcome.reconciled['report']}", file=sys.stderr)
        return EXIT_FAILED
    if outcome.decisions:
        print("\n".join(_serving_line(d) for d in outcome.decisions))
    if args.action == "status":
        print("\n".join(outcome.status_lines()))
    _write_json(args.json, outcome.as_json())
    return 0


def _serving_line(decision, with_run: bool = True) -> str:
    pinned = f" v{decision.source_version}" if decision.source_version is not None else " (at the cut below)"
    change = f"{decision.previous_mode} -> {decision.mode}" if decision.changed else decision.mode
    run = f" run {decision.run_id}:" if with_run else ""
    return f"{decision.view:32s} {change:18s} reads {decision.source_table}{pinned};{run} {decision.reason}"


def _declared(args: argparse.Namespace, settings: Settings):
    """The pipeline of ``--pipeline`` (default: the settings') as its code declares it, with no Spark session:
    for a command that acts on the pipeline, not on one generation's tables."""
    from spark_apps.target.resolution import declared

    return declared(settings, getattr(args, "pipeline", None))


def _resolved(args: argparse.Namespace, settings: Settings, command: str):
    """The command's Spark session and its target: the pipeline of ``--pipeline`` at its active generation. The
    code is loaded first, so an unknown pipeline fails before Spark starts."""
    return _active(settings, _declared(args, settings), command)


def _active(settings: Settings, given, command: str):
    """The command's Spark session and the active generation of the pipeline ``given`` declares."""
    from spark_apps.target import generations
    from spark_apps.target.resolution import active_of

    spark = _spark(settings, command, given.name)
    return spark, active_of(settings, given, generations.read(spark, settings, given.name))


def _spark(settings: Settings, command: str, name: str | None = None):
    """The command's Spark session, named after the pipeline it acts on."""
    from spark_apps.io.spark_session import get_spark

    return get_spark(settings, app_name=f"kappa-{command}" + (f"-{name}" if name else ""))


def _write_json(path: str | None, payload: dict) -> None:
    import json
    if path:
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(json.dumps(payload, indent=2, default=str))
        except OSError as exc:
            raise PlatformError(f"could not write --json {path}: {exc.strerror or exc}") from None


def _json_output(text: str) -> str:
    """An argparse type for ``--json``: a file this process can create or overwrite, checked before the command's
    work starts, so that a run of minutes does not end on a path it could never write."""
    import os
    path = Path(text).expanduser()
    if not text or path.is_dir():
        raise argparse.ArgumentTypeError(f"--json needs a file path, got {text!r}")
    if path.exists():
        writable = os.access(path, os.W_OK)
    else:
        folder = path.parent.absolute()
        while not folder.exists():
            folder = folder.parent
        writable = folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)
    if not writable:
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: permission denied or not a folder on the way")
    return str(path)


def _explain(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.audit.explain import explain

    spark, target = _resolved(args, settings, "explain")
    print("\n".join(explain(spark, settings, target, args.table, args.key, args.run_id).lines()))
    return 0


def _report(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.ops.overview import write_overview

    spark, target = _resolved(args, settings, "report")
    path = write_overview(spark, settings, target)
    print(f"overview: {path}")
    if args.screenshot is not None:
        from spark_apps.services.browser import view

        shown = view(path, "document.title", settings.browser, screenshot=args.screenshot)
        print(f"screenshot: {shown.screenshot}")
    return 0


def _alerts(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.alerts.dispatch import alert_line, incident_line, open_incidents, recent_alerts
    from spark_apps.io.spark_session import get_spark

    if args.open:
        incidents = sorted(open_incidents(settings).items(), key=lambda item: item[1].get("raised_at", ""))
        print("\n".join(incident_line(key, opened) for key, opened in incidents) or "no open incidents")
        return 0

    rows = recent_alerts(get_spark(settings, app_name="kappa-alerts"), settings, args.limit)
    print("\n".join(alert_line(row) for row in rows) or "no alerts recorded")
    return 0


def _maintain(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.ops.maintenance import maintain, summary_lines

    spark, target = _resolved(args, settings, "maintain")
    report = maintain(spark, settings, target, optimize=args.optimize, vacuum=args.vacuum)
    print("\n".join(summary_lines(report)))
    if not report.ok:
        print("kappa maintain: a table or a check failed; on-call has been alerted (docs/runbook.md)", file=sys.stderr)
        return EXIT_FAILED
    return 0


def _compact(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.io import delta_log
    from spark_apps.io.catalog import table_path
    from spark_apps.stream.compaction import compact

    spark, target = _resolved(args, settings, "compact")
    store = target.tables.store
    if not delta_log.has_commits(table_path(settings, store)):
        print(f"{store}: no store yet (the stream has not run); nothing to compact")
        return 0
    done = compact(spark, settings, target)
    print("\n".join(c.line() for c in done) or f"{store}: nothing to compact")
    return 0


def _dbt(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.serving.dbt_runner import run_steps

    pipeline = _declared(args, settings).pipeline
    spark = _spark(settings, "dbt", pipeline.name)
    steps = run_steps(spark, settings, pipeline, args.action, args.select, args.target)
    for step in steps:
        for view, source in step.get("served", {}).items():
            print(f"{view} read from {source}")
        if "refused" in step:
            print(f"kappa dbt {step['command']}: {step['refused']}", file=sys.stderr)
            continue
        counts = ", ".join(f"{n} {status}" for status, n in sorted(step["counts"].items()))
        print(f"dbt {step['command']}: {'ok' if step['success'] else 'FAILED'} ({counts or 'nothing ran'})")
        if step["command"].startswith("docs") and step["success"]:
            print(f"dbt docs: {dbt_docs_index(settings, pipeline.name)}")
    success = all(step["success"] for step in steps)
    _write_json(args.json, {"success": success, "steps": steps})
    if not success:
        # A refused step has said why above; this line sums up the steps dbt ran and failed.
        ran_and_failed = [step for step in steps if "refused" not in step and not step["success"]]
        if ran_and_failed:
            failed = sum(len(step.get("failed", [])) for step in ran_and_failed)
            print(f"kappa dbt: {failed} failed; on-call has been alerted; log {dbt_log(settings, pipeline.name)}",
                  file=sys.stderr)
        return EXIT_FAILED
    return 0


def _airflow(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.services import airflow_standalone as airflow

    if args.action == "start":
        running = airflow.start(settings)
        print(f"airflow running at {running.url} (process group {running.process_group}, log {running.log})")
        print(f"login: {running.user}, password in {running.password_file} (readable by you only)")
    elif args.action == "stop":
        print("airflow stopped" if airflow.stop(settings) else "airflow was not running")
    else:
        group = airflow.running_group(settings)
        if group is None:
            print("airflow is not running")
            return EXIT_FAILED
        health = airflow.health(settings) or {}
        states = ", ".join(f"{name} {(health.get(name) or {}).get('status', 'unknown')}"
                           for name in airflow.HEALTHY_COMPONENTS)
        print(f"airflow running at {airflow.url(settings)} (process group {group}): {states}")
    return 0


def _cluster(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.services import cluster

    if args.action == "up":
        started = cluster.start(settings)
        print("cluster started:" if started else "cluster already running:")
    elif args.action == "down":
        stopped = cluster.stop(settings)
        print(f"cluster stopped: {', '.join(stopped)}" if stopped else "cluster was not running")
        return 0
    for component in cluster.components(settings):
        state = f"pid {component.pid}" if component.pid else "NOT RUNNING"
        print(f"  {component.name:15s} {state:12s} {component.address}")
    if not cluster.is_running(settings):
        print("cluster is not (fully) running; `kappa cluster up` starts what is missing")
        return EXIT_FAILED
    print(f"  spark apps      {', '.join(cluster.running_apps(settings)) or 'none'}")
    print(f"point the apps at it ({cluster.env_file(settings)}):")
    print("\n".join(cluster.env_lines(settings)))
    return 0


def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.demo import run_demo

    return run_demo(settings)


def _chaos(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.lab.chaos import run_chaos
    from spark_apps.lab.scenario import ChaosPlan

    target = _declared(args, settings)
    target.pipeline.require_generator("the chaos lab (its checker compares the tables with the manifests)")
    plan = ChaosPlan(kills=args.kills, events=args.events, seed=args.seed, scenarios=tuple(args.scenario or ()),
                     pipeline=target.spec)
    results = run_chaos(settings, plan)
    print("\n".join(result.line() for result in results))
    kills = sum(r.kills for r in results)
    passed = sum(r.passed for r in results)
    where = settings.chaos_dir
    print(f"chaos: {passed}/{len(results)} scenarios passed, {kills} kills; results {where / 'results.json'}, "
          f"report {where / 'report.html'}")
    if passed < len(results):
        print(f"kappa chaos: {len(results) - passed} scenario(s) failed; stream logs in {where / 'logs'}",
              file=sys.stderr)
        return EXIT_FAILED
    return 0


def _init(args: argparse.Namespace, settings: Settings) -> int:
    """Draft a pipeline module and its test from a file's first rows, and say every guess it made."""
    import os
    import time

    from spark_apps.io.event_files import HISTORY_SAMPLE, event_files, sample_columns
    from spark_apps.pipeline.draft import draft, pipeline_module, pipeline_test_module

    source, folder = Path(args.source), Path(args.dir)
    module, test = folder / f"{args.name}.py", folder / f"test_{args.name}.py"
    sample = sample_columns(event_files(source), HISTORY_SAMPLE)
    drafted = draft(args.name, source.name, sample.columns, sample.cells_are_text, now_s=time.time(),
                    allowed_s=settings.allowed_lateness_s, id_field=args.id, time_field=args.time,
                    key_field=args.key, module=module)
    existing = [str(path) for path in (module, test) if path.exists()]
    if existing and not args.force:
        raise PlatformError(f"{' and '.join(existing)} already exist; add --force to write over them")
    folder.mkdir(parents=True, exist_ok=True)
    module.write_text(pipeline_module(drafted), encoding="utf-8")
    from_folder = os.path.relpath(source, folder)
    test.write_text(pipeline_test_module(drafted, from_folder), encoding="utf-8")
    print(f"read the first {sample.rows:,} rows of {args.source}"
          + (f" ({sample.unreadable:,} more were not rows and are left out)" if sample.unreadable else ""))
    print("\n".join(drafted.notes))
    there = "" if folder.resolve() == Path.cwd() else f"cd {folder} && "
    produce = f"kappa produce --pipeline {drafted.name}:PIPELINE --file {from_folder}"
    print(f"wrote {module} and {test}; next: {there}{produce}")
    return 0


def _schema(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.pipeline.event_schema import VALIDATION_ORDER_DOC, markdown_table

    print(markdown_table(_declared(args, settings).pipeline.schema))
    print()
    print(VALIDATION_ORDER_DOC)
    return 0


def _class_archive(args: argparse.Namespace, settings: Settings) -> int:
    import time

    from spark_apps.io.class_archive import build

    began = time.monotonic()
    archive = build(settings)
    print(f"Spark class archive built in {time.monotonic() - began:.0f}s: {archive} "
          f"({archive.stat().st_size / 2**20:.0f} MiB)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from spark_apps.lab.scenario import SCENARIO_NAMES
    from spark_apps.services.kafka_tools import TOOLS as KAFKA_TOOLS
    from spark_apps.serving.dbt_runner import COMMANDS

    parser = _Parser(prog="kappa", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    broker = commands.add_parser("broker", help="start, stop or check the embedded Kafka broker")
    broker.add_argument("action", choices=("start", "stop", "status"))
    broker.set_defaults(handler=_broker)

    catalog = commands.add_parser(
        "catalog", help="start, stop or check the catalog database (the Hive metastore every process shares); "
                        "sync registers every table of the warehouse folder and the serving views in it (recovery)")
    catalog.add_argument("action", choices=("start", "stop", "status", "sync"))
    catalog.add_argument("--pipeline", help="sync: the pipeline whose serving views to point again (default: settings "
                                            "pipeline)")
    catalog.set_defaults(handler=_catalog)

    s3 = commands.add_parser("s3", help="start, stop or check the embedded S3-compatible server (S3Proxy) for s3a:// "
                                        "paths; create-bucket NAME makes a bucket; up starts it with the buckets "
                                        "of the settings' s3a:// locations when KAPPA_S3_ENDPOINT points at it")
    s3.add_argument("action", choices=("up", "start", "stop", "status", "create-bucket"))
    s3.add_argument("bucket", nargs="?", help="create-bucket: the bucket's name")
    s3.set_defaults(handler=_s3)

    sql = commands.add_parser(
        "sql", help="start, stop or check the SQL endpoint (Spark Thrift Server, JDBC/ODBC) over the catalog; "
                    "beeline opens Spark's beeline on it (extra arguments go to beeline, e.g. -e 'SHOW SCHEMAS')")
    sql.add_argument("action", choices=("start", "stop", "status", "beeline"))
    sql.add_argument("beeline_args", nargs=argparse.REMAINDER, help="beeline's own arguments")
    sql.set_defaults(handler=_sql)

    kafka = commands.add_parser(
        "kafka", help="run one of Kafka's own tools against the platform's broker, e.g. `kappa kafka "
                      "console-consumer --topic marketplace.events --from-beginning`")
    kafka.add_argument("tool", choices=sorted(KAFKA_TOOLS), help="the tool (kafka-<tool>.sh of a Kafka install)")
    kafka.add_argument("tool_args", nargs=argparse.REMAINDER, help="the tool's own arguments (--help lists them)")
    kafka.set_defaults(handler=_kafka)

    topic = commands.add_parser("topic", help="create the events topic (or check an existing one)")
    topic.add_argument("--name", help="topic name (default: settings events_topic)")
    topic.add_argument("--partitions", type=_positive_int, help="partitions for a new topic")
    topic.set_defaults(handler=_topic)

    produce = commands.add_parser(
        "produce", help="send a pipeline's generated events (with a manifest), or the events of a file, into the log")
    produce.add_argument("--pipeline", help="pipeline name or module:attribute (default: settings pipeline)")
    produce.add_argument("--file", help="send the events of this file or folder instead of generating them: .jsonl "
                                        "(one JSON object a line) or .csv (header row of field names), either "
                                        "with .gz, or .parquet")
    produce.add_argument("--strict", action="store_true",
                         help="refuse the file at its first record that is not a valid event, before sending any "
                              "(default: send it, and the stream dead-letters it with a reason)")
    produce.add_argument("--accept-late", action="store_true",
                         help="send a file of history although the pipeline's lateness rule flags it late")
    size = produce.add_mutually_exclusive_group()
    size.add_argument("--events", type=_positive_int, help="records to generate (default 10000)")
    size.add_argument("--duration", type=_positive_float, help="seconds to produce for (needs --rate)")
    produce.add_argument("--rate", type=_positive_float, help="events per second (default: as fast as possible)")
    produce.add_argument("--seed", type=int, help="generator seed (default 42; same seed, same records)")
    produce.add_argument("--base-time-ms", type=int, help="event-time origin in epoch ms (default: now)")
    produce.add_argument("--topic", help="topic (default: the pipeline's source topic)")
    produce.add_argument("--manifest", help="where to write the expected-results manifest")
    produce.set_defaults(handler=_produce)

    stream = commands.add_parser("stream", help="run the streaming job of a pipeline")
    stream.add_argument("--continuous", action="store_true",
                        help="keep running on a processing-time trigger (default: stop when caught up)")
    stream.add_argument("--pipeline", help="pipeline name or module:attribute (default: settings pipeline)")
    stream.add_argument("--reset", action="store_true", help="delete the checkpoint and stream tables first")
    stream.add_argument("--yes", action="store_true", help="confirm --reset")
    stream.set_defaults(handler=_stream)

    supervise = commands.add_parser(
        "supervise", help="start the stream if it is down, check its heartbeat and lag, alert (exit 1 if unhealthy)")
    action = supervise.add_mutually_exclusive_group()
    action.add_argument("--no-start", action="store_true", help="only report: leave a stopped stream stopped")
    action.add_argument("--stop", action="store_true", help="stop the supervised stream (SIGTERM, then SIGKILL)")
    supervise.add_argument("--pipeline", help="pipeline name or module:attribute (default: settings pipeline)")
    supervise.set_defaults(handler=_supervise)

    status = commands.add_parser(
        "status", help="every pipeline at a glance: stream, lag, last audit and verdict, serving (exit 1 if one "
                       "needs attention)")
    status.add_argument("--pipeline", action="append",
                        help="only this pipeline (repeatable; default: every registered one and the settings one)")
    status.add_argument("--json", type=_json_output, help="also write the statuses as JSON to this file")
    status.set_defaults(handler=_status)

    lineage = commands.add_parser("lineage", help="print the log offsets a stream table version reflects")
    lineage.add_argument("--table", required=True, help="schema.table, e.g. gold.merchant_revenue")
    lineage.add_argument("--version", type=int, help="table version (default: latest)")
    lineage.set_defaults(handler=_lineage)

    reconcile = commands.add_parser(
        "reconcile", help="recompute from the log and prove each stream table equals the batch (exit 1 if not)")
    reconcile.add_argument("--pipeline", help="pipeline name or module:attribute (default: settings pipeline)")
    reconcile.add_argument("--table", help="audit the stream batch this table's version reflects")
    reconcile.add_argument("--version", type=int, help="version of --table (default: its latest)")
    reconcile.add_argument("--only", help="comma-separated stream tables to reconcile (default: all)")
    reconcile.add_argument("--as-of", type=_timestamp,
                           help="audit the last stream batch committed by this ISO time (default: the last one)")
    reconcile.add_argument("--run-id", type=_run_id,
                           help="name the run; a run already in the ledger is reported, not recomputed")
    reconcile.add_argument("--no-serving", dest="serve", action="store_false",
                           help="do not apply the verdict to the serving state of the gold tables")
    reconcile.add_argument("--if-due", action="store_true",
                           help="skip when every gold table serves the stream and the last audit is recent")
    reconcile.add_argument("--kind", choices=("full", "incremental", "auto"), default="full",
                           help="full: recompute the whole log; incremental: extend the last verified run by the "
                                "records since; auto: incremental unless the last full run is "
                                "KAPPA_FULL_AUDIT_EVERY_S old (default: full)")
    reconcile.add_argument("--json", type=_json_output, help="also write the run's outcome as JSON to this file")
    reconcile.set_defaults(handler=_reconcile)

    serve = commands.add_parser("serving", help="show or advance which copy (batch or stream) each gold table serves")
    serve.add_argument("action", choices=("status", "history", "advance", "fallback"))
    serve.add_argument("--reason", help="fallback: why the operator moves every table back to the batch snapshot")
    serve.add_argument("--table", help="history of one gold table, e.g. gold.order_status")
    serve.add_argument("--run-id", type=_run_id, help="advance: the reconciliation run whose verdict to apply")
    serve.add_argument("--pipeline", help="pipeline name or module:attribute (default: settings pipeline)")
    serve.add_argument("--json", type=_json_output, help="also write the decisions as JSON to this file")
    serve.set_defaults(handler=_serving)

    replay_cmd = commands.add_parser(
        "replay", help="blue/green Kappa replay: build a new generation from offset 0, reconcile, swap, roll back")
    replay_cmd.add_argument("action", choices=("start", "build", "reconcile", "swap", "rollback", "status"),
                            help="start = build + reconcile; build = stream the new generation until caught up; "
                                 "swap only after an exact reconciliation (start or reconcile with --swap do it)")
    replay_cmd.add_argument("--pipeline", help="pipeline name or module:attribute; start/build: the code to deploy "
                                               "(default: settings pipeline)")
    replay_cmd.add_argument("--generation", help="generation name, e.g. g2 (default: the next, or the pending one)")
    replay_cmd.add_argument("--reason", help="why (recorded); required by rollback")
    replay_cmd.add_argument("--run-id", type=_run_id, help="name the reconciliation; one in the ledger is reused")
    replay_cmd.add_argument("--swap", action="store_true",
                            help="start, reconcile: swap serving when the reconciliation is exact")
    replay_cmd.add_argument("--replay-of", metavar="PIPELINE",
                            help="refuse --pipeline code that declares another pipeline than this one (the replay "
                                 "DAG passes its own)")
    replay_cmd.add_argument("--json", type=_json_output, help="also write the outcome as JSON to this file")
    replay_cmd.set_defaults(handler=_replay)

    explain = commands.add_parser("explain", help="trace one gold key: both sides' rows, the log records that feed it, "
                                                  "the micro-batch that last wrote it")
    explain.add_argument("--pipeline", help="pipeline name or module:attribute (default: settings pipeline)")
    explain.add_argument("--table", required=True, help="the gold table, e.g. gold.order_status")
    explain.add_argument("--key", action="append", required=True, metavar="COLUMN=VALUE",
                         help="one per primary key column, e.g. --key order_id=o-17")
    explain.add_argument("--run-id", help="the reconciliation to explain (default: the newest of the table)")
    explain.set_defaults(handler=_explain)

    report = commands.add_parser("report", help="write a pipeline's overview page: verdicts, audits, lag and latency, "
                                                "serving modes and incidents over time")
    report.add_argument("--pipeline", help="pipeline name or module:attribute (default: settings pipeline)")
    report.add_argument("--screenshot", type=Path, metavar="PNG",
                        help="also save a picture of the whole page, taken by a headless browser (KAPPA_BROWSER)")
    report.set_defaults(handler=_report)

    alerts = commands.add_parser("alerts", help="list recent alerts, newest first (records pending ones first)")
    alerts.add_argument("--limit", type=_positive_int, default=20, help="alerts to show (default 20)")
    alerts.add_argument("--open", action="store_true",
                        help="the incidents open now, oldest first, each with what opened it (no Spark)")
    alerts.set_defaults(handler=_alerts)

    maintain = commands.add_parser(
        "maintain", help="OPTIMIZE and VACUUM every table, check checkpoint and log retention (exit 1 on a failure)")
    maintain.add_argument("--pipeline", help="pipeline name or module:attribute (default: settings pipeline)")
    maintain.add_argument("--no-optimize", dest="optimize", action="store_false", help="skip OPTIMIZE")
    maintain.add_argument("--no-vacuum", dest="vacuum", action="store_false", help="skip VACUUM")
    maintain.set_defaults(handler=_maintain)

    compact_cmd = commands.add_parser(
        "compact", help="fold the tail of every gold table of the stream's store into its base (off the hot path)")
    compact_cmd.add_argument("--pipeline", help="pipeline name or module:attribute (default: settings pipeline)")
    compact_cmd.set_defaults(handler=_compact)

    dbt = commands.add_parser(
        "dbt", help="run dbt over the reconciled serving views (refuses unreconciled ones; alerts on failures)")
    dbt.add_argument("action", nargs="+", choices=tuple(COMMANDS),
                     help="build = models + tests + unit tests; freshness = source freshness; docs = static docs "
                          "site; several run one after the other in this one process")
    dbt.add_argument("--select", help="dbt node selection, e.g. merchant_daily_revenue+")
    dbt.add_argument("--pipeline", help="pipeline name or module:attribute (default: settings pipeline)")
    dbt.add_argument("--json", type=_json_output, help="also write the outcome as JSON to this file")
    dbt.add_argument("--target", choices=("session", "thrift"),
                     help="session (default): on this process's Spark; thrift: on the SQL endpoint of `make sql`")
    dbt.set_defaults(handler=_dbt)

    airflow = commands.add_parser("airflow", help="start, stop or check this machine's Airflow (loopback only)")
    airflow.add_argument("action", choices=("start", "stop", "status"))
    airflow.set_defaults(handler=_airflow)

    cluster = commands.add_parser(
        "cluster", help="start, stop or check a KRaft cluster (3 brokers) and a Spark standalone master with workers "
                        "(2) on this machine, loopback only; prints the settings that point the apps at them")
    cluster.add_argument("action", choices=("up", "down", "status"))
    cluster.set_defaults(handler=_cluster)

    demo = commands.add_parser("demo", help="run the end-to-end demo on the embedded setup")
    demo.set_defaults(handler=_demo)

    chaos = commands.add_parser(
        "chaos", help="inject faults (kill -9, broker restart, zombie writer, ...) into real stream processes and "
                      "prove every scenario exact (exit 1 if one is not)")
    chaos.add_argument("--kills", type=_positive_int, default=20,
                       help="kill -9 of the stream in kill_stream (default 20; every third by the fault hook)")
    chaos.add_argument("--scenario", action="append", choices=SCENARIO_NAMES,
                       help="run only this scenario (repeatable; default: all)")
    chaos.add_argument("--seed", type=int, default=7, help="seed of the kill moments and the generator (default 7)")
    chaos.add_argument("--events", type=_positive_int, default=1000,
                       help="records produced per scenario (default 1000)")
    chaos.add_argument("--pipeline", help="pipeline name or module:attribute whose generator feeds the scenarios "
                                          "(default: settings pipeline)")
    chaos.set_defaults(handler=_chaos)

    init = commands.add_parser("init", help="draft a pipeline module and its test from a file of your events")
    init.add_argument("name", help="the pipeline's name: its module, topic and table prefix")
    init.add_argument("--from", dest="source", required=True, metavar="FILE",
                      help="a file (or folder) of events, in any format `kappa produce --file` reads")
    init.add_argument("--id", help="the column of event ids (default: guessed and said)")
    init.add_argument("--time", help="the column of event times (default: guessed and said)")
    init.add_argument("--key", help="the column whose value keys each record, or none (default: guessed and said)")
    init.add_argument("--dir", default=".", help="where to write NAME.py and test_NAME.py (default: here)")
    init.add_argument("--force", action="store_true", help="write over those files if they exist")
    init.set_defaults(handler=_init)

    schema = commands.add_parser("schema", help="print a pipeline's event schema and the validation order")
    schema.add_argument("--pipeline", help="pipeline name or module:attribute (default: settings pipeline)")
    schema.set_defaults(handler=_schema)

    archive = commands.add_parser("class-archive", help="build the Spark driver's class archive, so each Spark "
                                                        "process starts faster (make jars runs it)")
    archive.set_defaults(handler=_class_archive)
    return parser


def _positive(kind: type, strict: bool):
    """An argparse type: a finite number of ``kind`` that is >= 1 (``strict``: > 0), with a one-line error."""
    noun = "a whole number" if kind is int else "a number"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text}")
        if value <= 0 or (not strict and value < 1):
            raise argparse.ArgumentTypeError(f"expected {noun} {'> 0' if strict else '>= 1'}, got {text}")
        return value

    return parse


def _timestamp(text: str):
    """An ISO-8601 time; one without a zone is UTC."""
    import datetime as dt

    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an ISO time like 2026-11-22T10:00:00Z, got {text!r}") from None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _run_id(text: str) -> str:
    import re

    if not re.fullmatch(r"[A-Za-z0-9_.:+-]{1,120}", text):
        raise argparse.ArgumentTypeError(f"a run id is letters, digits and _.:+- only, got {text!r}")
    return text


_positive_int = _positive(int, strict=False)
_positive_float = _positive(float, strict=True)


def _show_progress() -> None:
    """Long commands report progress (each micro-batch, each audit phase and table) as log lines on stderr.

    The clients underneath stay silent: their failures (an unreachable broker, say) reach the user as the
    platform's own one-line error, not as a page of retries.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    for client in ("py4j", "kafka", "great_expectations"):
        logging.getLogger(client).setLevel(logging.CRITICAL)


def _spark_log_named(settings: Settings | None, error: BaseException) -> str:
    """Where Spark's own account of an error is, when Spark raised it (its warnings and stacks go to a file, not the
    console): a py4j or PySpark exception in the error's chain, or a failed streaming query."""
    job = sys.modules.get("spark_apps.stream.job")
    seen: BaseException | None = error
    while seen is not None and settings is not None:
        if type(seen).__module__.startswith(("py4j", "pyspark")) or (job and isinstance(seen, job.StreamFailed)):
            from spark_apps.io.spark_session import spark_log

            return f" (Spark's log: {spark_log(settings)})"
        seen = seen.__cause__ or seen.__context__
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _show_progress()
    handler: Callable[[argparse.Namespace, Settings], int] = args.handler
    settings = None
    try:
        settings = Settings.from_env()
        return handler(args, settings)
    except PlatformError as exc:
        print(f"kappa {args.command}: error: {exc}{_spark_log_named(settings, exc)}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"kappa {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
