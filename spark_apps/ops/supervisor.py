"""Stream supervision: keep the streaming job running in its own process and tell on-call when it is unhealthy.

An Airflow task calls this every few minutes, so it never imports pyspark: it reads the job's pid file and
heartbeat and the log end offsets (kafka-python), and judges them with the pure ``assess``. Statuses, worst first:

- ``down``: no stream process runs (``supervise`` then starts one and reports ``started``);
- ``stalled``: the process runs but shows no progress for ``stream_stall_s``: no heartbeat (counted from its start
  when it has written none since), or no micro-batch completed while the log held records it had not read;
- ``lagging``: more than ``max_lag_records`` records between its committed offsets and the log end;
- ``ok``;
- ``stopped``: no stream process runs because the last one ended as asked, caught up (``kappa stream`` without
  ``--continuous``); healthy, and ``supervise`` starts one as it would for ``down``;
- ``idle``: nothing was ever deployed (no stream process, no heartbeat, no topic yet): nothing to supervise.

Before all of these, ``rewound``: the topic is not the log the stream read (recreated, truncated: see
``log_identity``). The supervisor then stops the stream, starts nothing and pages.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from spark_apps.alerts.alert import Alert, runbook
from spark_apps.alerts.dispatch import dispatch, resolve_cleared
from spark_apps.core.errors import PlatformError
from spark_apps.core.paths import forget_ending, heartbeat_path
from spark_apps.core.settings import Settings
from spark_apps.core.waiting import poll
from spark_apps.io.log_identity import log_problem
from spark_apps.io.topics import LogState, describe_log
from spark_apps.pipeline.declaration import TableNames, load_pipeline
from spark_apps.pipeline.target import Target
from spark_apps.services.processes import cmdline, read_pid

# A stream started by hand (no pid file) counts as running while its heartbeat is this fresh (it beats every half
# second), so the supervisor never starts a second query on the same checkpoint.
UNSUPERVISED_BEAT_S = 30.0
# Lag beyond this many times max_lag_records pages on-call; below it a lagging stream is a warning.
CRITICAL_LAG_FACTOR = 10
STOP_TIMEOUT_S = 120.0
_SUMMARIES = {"rewound": "reads a topic that is not its log",
              "started": "was down, restarted", "crash-loop": "keeps crashing", "down": "is down",
              "stalled": "is stalled", "lagging": "is lagging", "blind": "cannot be supervised"}


@dataclass(frozen=True)
class Health:
    """One verdict on the stream; ``detail`` is the line on-call reads first."""

    status: str  # "ok" | "started" | "crash-loop" | "down" | "stalled" | "lagging" | "blind" (log unreadable)
    #              | "rewound" (the topic is not the log the stream read) | "idle" (never started, no topic yet)
    #              | "stopped" (the last run ended as asked, caught up)
    lag_records: int | None  # None until the stream reports its first progress
    lag_by_partition: dict[int, int]
    heartbeat_age_s: float | None
    detail: str
    pid: int | None = None

    @property
    def healthy(self) -> bool:
        return self.status in ("ok", "started", "idle", "stopped")


# Fewer records than this in the heartbeat's window are too few to judge a dead-letter ratio by.
DEAD_LETTER_MIN_RECORDS = 100


def recent_restarts(restarts: list[float], now_s: float, window_s: float) -> list[float]:
    """The restart times (epoch seconds) within the window before ``now_s``, oldest first."""
    return sorted(t for t in restarts if now_s - t <= window_s)


# ---- pure ---------------------------------------------------------------------------------------------------------


def stream_command(pipeline: str) -> list[str]:
    """The arguments after the interpreter that run (and identify) the supervised stream of ``pipeline``."""
    return ["-m", "spark_apps.cli", "stream", "--continuous", "--pipeline", pipeline]


def streamed_spec(argv: list[str]) -> str | None:
    """The pipeline spec of a supervised stream's command line, or None for any other process (a pid the system
    reused is not the stream)."""
    prefix = stream_command("")[:-1]
    if len(argv) != len(prefix) + 2 or argv[1:-1] != prefix:
        return None
    return argv[-1]


def is_stream_of(argv: list[str], target: Target) -> bool:
    """Whether a process's command line is the supervised stream of ``target``'s pipeline, under any spec that
    names it: the registered name and ``module:attribute`` load the same pipeline and keep the same files."""
    spec = streamed_spec(argv)
    if spec is None:
        return False
    if spec in (target.spec, target.name):
        return True
    try:
        return load_pipeline(spec).name == target.name
    except PlatformError:
        return False


def stream_topic(heartbeat: dict | None, settings: Settings, default: str | None = None) -> str:
    """The topic the stream reports offsets of (a pipeline may name its own), else ``default`` or the settings'
    events topic."""
    topics = list(_end_offsets(heartbeat))
    return topics[0] if len(topics) == 1 else default or settings.events_topic


def committed_offsets(heartbeat: dict | None, topic: str) -> dict[int, int] | None:
    """Per partition, the offset the stream's last micro-batch ended at; None before its first progress report."""
    by_topic = _end_offsets(heartbeat)
    return {int(p): int(o) for p, o in by_topic[topic].items()} if topic in by_topic else None


def _end_offsets(heartbeat: dict | None) -> dict:
    """Spark's endOffset, ``{"topic": {"0": 123}}``: PySpark 4 hands it over as a JSON string, older ones as a dict."""
    raw = (heartbeat or {}).get("end_offsets")
    return (json.loads(raw) if isinstance(raw, str) else raw) or {}


def lag_by_partition(heartbeat: dict | None, log_end: dict[int, int], settings: Settings) -> dict[int, int] | None:
    """Records between the stream's committed offsets and the log end, per partition; None before its first progress."""
    committed = committed_offsets(heartbeat, stream_topic(heartbeat, settings))
    if committed is None:
        return None
    return {p: max(0, end - committed.get(p, 0)) for p, end in sorted(log_end.items())}


def track_progress(previous: dict | None, pid: int | None, last_batch_id: int | None, lag_records: int | None,
                   now_s: float) -> dict | None:
    """Since when the stream has been behind without completing a micro-batch; None when it is caught up.

    Kept between supervisor runs: one heartbeat cannot tell a query stuck in a micro-batch from one busy with it.
    An unknown lag (no progress report yet) counts as behind.
    """
    if lag_records == 0:
        return None
    seen = {"pid": pid, "last_batch_id": last_batch_id}
    if previous and all(previous.get(key) == value for key, value in seen.items()):
        return previous
    return {**seen, "since_s": now_s}


def rewound(heartbeat: dict | None, log_end: dict[int, int], current_topic_id: str | None, topic: str) -> str:
    """Why ``topic`` is not the log the stream's heartbeat says it read, or "" (see ``log_identity``)."""
    return log_problem(topic, (heartbeat or {}).get("topic_id"), current_topic_id,
                       committed_offsets(heartbeat, topic) or {}, log_end)


def assess(heartbeat: dict | None, process_alive: bool, log_end: dict[int, int], now_s: float, settings: Settings,
           *, started_at_s: float | None = None, behind_since_s: float | None = None) -> Health:
    """Judge the stream from its process, its heartbeat and the log end.

    ``started_at_s`` (when the process started) keeps a heartbeat left by an earlier run from making a starting
    process look stalled; ``behind_since_s`` comes from ``track_progress``.
    """
    lag = lag_by_partition(heartbeat, log_end, settings)
    lag_records = None if lag is None else sum(lag.values())
    beat_at = (heartbeat or {}).get("written_at_epoch_s")
    age = None if beat_at is None else round(now_s - beat_at, 1)

    def health(status: str, detail: str) -> Health:
        return Health(status, lag_records, lag or {}, age, detail)

    unsupervised = (not process_alive and bool((heartbeat or {}).get("query_active"))
                    and age is not None and age <= UNSUPERVISED_BEAT_S)
    if not (process_alive or unsupervised):
        last = "no heartbeat" if age is None else f"last heartbeat {age:.0f}s ago"
        if (heartbeat or {}).get("ended") == "caught_up":
            return health("stopped", f"the last run read the log to its end and ended as asked ({last}); "
                                     "`kappa stream --continuous` or the supervisor keeps one running")
        return health("down", f"no stream process is running ({last})")
    limit = settings.stream_stall_s
    last_sign = max((t for t in (beat_at, started_at_s) if t is not None), default=None)
    if last_sign is not None and now_s - last_sign > limit:
        return health("stalled", f"no heartbeat for {now_s - last_sign:.0f}s (limit {limit}s)")
    if lag_records != 0 and behind_since_s is not None and now_s - behind_since_s > limit:
        behind = "with unknown lag" if lag_records is None else f"{lag_records:,} records behind"
        return health("stalled", f"no micro-batch completed for {now_s - behind_since_s:.0f}s while {behind} "
                                 f"(limit {limit}s)")
    if lag_records is not None and lag_records > settings.max_lag_records:
        return health("lagging", f"{lag_records:,} records behind the log end (limit {settings.max_lag_records:,})")
    state = ("no progress reported yet" if lag_records is None else
             "caught up" if lag_records == 0 else f"{lag_records:,} records behind")
    by_hand = "; no supervised process, but a fresh heartbeat (started by hand?)" if unsupervised else ""
    return health("ok", state + by_hand)


def alert_for(health: Health, settings: Settings, target: Target, log_end: dict[int, int]) -> Alert | None:
    """The alert a verdict raises, if any; a restart still tells on-call, and its dedup key makes repeats one
    incident. Lag pages (critical) only beyond CRITICAL_LAG_FACTOR times the threshold."""
    if health.status in ("ok", "idle", "stopped"):
        return None
    critical = health.status in ("down", "stalled", "blind", "crash-loop", "rewound") or (
        health.status == "lagging" and health.lag_records > CRITICAL_LAG_FACTOR * settings.max_lag_records)
    pipeline = target.name
    anchor = "stream-down" if health.status == "started" else f"stream-{health.status}"
    return Alert(
        severity="critical" if critical else "warning",
        summary=f"stream {pipeline} {_SUMMARIES[health.status]}: {health.detail}",
        source="supervisor",
        dedup_key=f"stream:{pipeline}:{health.status}",
        table="",
        offsets=health.lag_by_partition if health.lag_records is not None else dict(log_end),
        details={"status": health.status, "pid": health.pid, "lag_records": health.lag_records,
                 "heartbeat_age_s": health.heartbeat_age_s, "max_lag_records": settings.max_lag_records,
                 "stream_stall_s": settings.stream_stall_s, "log_file": str(log_path(settings, target)),
                 "heartbeat_file": str(heartbeat_path(settings, target.name))},
        runbook=runbook(anchor),
    )


def dead_letter_alert(heartbeat: dict | None, settings: Settings, target: Target) -> Alert | None:
    """An alert when dead letters exceed their allowed share of what the stream read within the heartbeat's window
    (at least ``DEAD_LETTER_MIN_RECORDS`` records, so two bad records of three page nobody); critical above half,
    which is what a producer on a schema version the pipeline does not know looks like."""
    records, dead, seconds = _window(heartbeat, "dead_letters")
    if records < DEAD_LETTER_MIN_RECORDS or dead <= settings.dead_letter_max_ratio * records:
        return None
    return _window_alert(
        heartbeat, settings, target, dead, records, "dead-letters", _tables(heartbeat, target).dead_letters,
        "dead-letter-ratio",
        f"dead-lettered {dead:,} of {records:,} records ({dead / records:.1%}) in the last {seconds}s "
        f"(limit {settings.dead_letter_max_ratio:.1%})",
        {"records": records, "dead_letters": dead, "window_s": seconds,
         "dead_letter_max_ratio": settings.dead_letter_max_ratio})


def future_event_alert(heartbeat: dict | None, settings: Settings, target: Target) -> Alert | None:
    """An alert when events of the heartbeat's window claim times more than ``future_skew_s`` after the broker
    appended them: a producer's clock or code is wrong, and reconciliation cannot see it (the batch reads the same
    times). Critical when they are more than half of what the stream read."""
    records, future, seconds = _window(heartbeat, "future_events")
    if not future:
        return None
    return _window_alert(
        heartbeat, settings, target, future, records, "future-events", _tables(heartbeat, target).events,
        "future-events",
        f"read {future:,} of {records:,} events stamped more than {settings.future_skew_s}s after the broker "
        f"appended them, in the last {seconds}s",
        {"records": records, "future_events": future, "window_s": seconds, "future_skew_s": settings.future_skew_s})


def _tables(heartbeat: dict | None, target: Target) -> TableNames:
    """The tables of the generation the stream reports writing: the supervisor's target is the pipeline as
    declared, while the stream keeps the active generation."""
    return target.pipeline.tables((heartbeat or {}).get("generation") or target.generation)


def _window(heartbeat: dict | None, counted: str) -> tuple[int, int, int | None]:
    """(records, ``counted``, seconds) of the heartbeat's window; zeros for a heartbeat without one."""
    window = (heartbeat or {}).get("window") or {}
    return window.get("records") or 0, window.get(counted) or 0, window.get("seconds")


def _window_alert(heartbeat: dict | None, settings: Settings, target: Target, count: int, records: int,
                  condition: str, table: str, anchor: str, what: str, details: dict) -> Alert:
    """A data problem of the heartbeat's window, critical when it is more than half of what the stream read."""
    return Alert(
        severity="critical" if count > records / 2 else "warning",
        summary=f"stream {target.name} {what}",
        source="supervisor",
        dedup_key=f"stream:{target.name}:{condition}",
        table=table,
        offsets=committed_offsets(heartbeat, stream_topic(heartbeat, settings, target.topic)) or {},
        details=details,
        runbook=runbook(anchor),
    )


def window_alerts(heartbeat: dict | None, settings: Settings, target: Target) -> list[Alert]:
    """The data problems of the heartbeat's window that stream and batch agree on, so only the stream sees."""
    found = (dead_letter_alert(heartbeat, settings, target), future_event_alert(heartbeat, settings, target))
    return [alert for alert in found if alert is not None]


def status_line(health: Health, pipeline: str) -> str:
    lag = "unknown" if health.lag_records is None else f"{health.lag_records:,} records"
    age = "none" if health.heartbeat_age_s is None else f"{health.heartbeat_age_s:.0f}s old"
    pid = health.pid or "-"
    return f"stream {pipeline}: {health.status} (pid {pid}, lag {lag}, heartbeat {age}) - {health.detail}"


# ---- files and processes ------------------------------------------------------------------------------------------




def pid_path(settings: Settings, target: Target) -> Path:
    return settings.run_dir / f"{target.name}.stream.pid"


def log_path(settings: Settings, target: Target) -> Path:
    return settings.log_dir / f"stream-{target.name}.log"


def _restarts_path(settings: Settings, target: Target) -> Path:
    return settings.run_dir / f"{target.name}.restarts.json"


def _progress_path(settings: Settings, target: Target) -> Path:
    return settings.run_dir / f"{target.name}.supervisor.json"


def _read_json(path: Path) -> dict | None:
    """A file's JSON object, or None when it is missing or unreadable (then it is as if nothing was recorded)."""
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _ever_started(settings: Settings, target: Target) -> bool:
    """Whether the supervisor ever started this stream: then a lost topic is an incident, not a fresh home."""
    return log_path(settings, target).exists() or _restarts_path(settings, target).exists()


def read_heartbeat(settings: Settings, target: Target) -> dict | None:
    return _read_json(heartbeat_path(settings, target.name))


def stream_pid(settings: Settings, target: Target) -> int | None:
    """The pid of the running supervised stream, or None."""
    pid = read_pid(pid_path(settings, target))
    if pid is None:
        return None
    return pid if is_stream_of(cmdline(pid), target) else None


def stream_process_alive(settings: Settings, target: Target) -> bool:
    return stream_pid(settings, target) is not None


def start_stream(settings: Settings, target: Target) -> int:
    """Launch ``kappa stream --continuous`` detached from this process (its own session, so it outlives an Airflow
    task), output appended to the stream log; returns its pid, also written to the pid file."""
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    settings.log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_path(settings, target), "ab") as log:
        process = subprocess.Popen([sys.executable, *stream_command(target.spec)],
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, env={**os.environ, **settings.as_env()})
    pid_path(settings, target).write_text(f"{process.pid}\n")
    forget_ending(heartbeat_path(settings, target.name))
    return process.pid


def stop_stream(settings: Settings, target: Target, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """Stop the supervised stream: SIGTERM lets it finish cleanly; after ``timeout_s`` SIGKILL ends its whole
    session (the Python driver and its Spark JVM). True if it was running."""
    pid = stream_pid(settings, target)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not _wait_gone(pid, target, timeout_s):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            _wait_gone(pid, target, STOP_TIMEOUT_S)
    pid_path(settings, target).unlink(missing_ok=True)
    return pid is not None


def _wait_gone(pid: int, target: Target, timeout_s: float) -> bool:
    return bool(poll(lambda: not is_stream_of(cmdline(pid), target), timeout_s, every_s=0.2))


def read_log(settings: Settings, topic: str) -> LogState:
    """The topic's id and offsets now: the one broker read of a round."""
    return describe_log(settings, topic)


# ---- one round ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Observation:
    """One look at the stream, and what it was judged from."""

    health: Health
    heartbeat: dict | None
    log_end: dict[int, int]
    progress: dict | None  # ``track_progress``'s record, for the next round to judge a stall by


def observe(settings: Settings, target: Target, now: float) -> Observation:
    """Judge the stream as a supervision round does, without acting on it (``kappa status`` shows this): ``blind``
    when the log cannot be read, ``rewound`` when the topic is not the log the stream read, else ``assess``.
    ``topic`` is the one the pipeline reads, for a stream that has not reported its own yet: before its first
    micro-batch, a stream's heartbeat names no topic, and the settings' events topic need not be the pipeline's."""
    pid = stream_pid(settings, target)
    heartbeat = read_heartbeat(settings, target)
    topic = stream_topic(heartbeat, settings, target.topic)
    log, blind = log_or_why_not(settings, topic)
    never_deployed = pid is None and heartbeat is None and not _ever_started(settings, target)
    if log is not None and not log.offsets and never_deployed:
        # Nothing was ever deployed: no topic, no stream, no heartbeat. Nothing to supervise, nothing to page.
        return Observation(Health("idle", None, {}, None, f"never started: {blind}"), heartbeat, {}, None)
    if log is None or not log.offsets:
        return Observation(Health("blind", None, {}, None, blind, pid=pid), heartbeat, {}, None)
    problem = rewound(heartbeat, log.log_end, log.topic_id, topic)
    if problem:
        return Observation(Health("rewound", None, {}, None, problem, pid=pid), heartbeat, log.log_end, None)
    lag = lag_by_partition(heartbeat, log.log_end, settings)
    progress = track_progress(_read_json(_progress_path(settings, target)), pid, (heartbeat or {}).get("last_batch_id"),
                              None if lag is None else sum(lag.values()), now)
    started_at = pid_path(settings, target).stat().st_mtime if pid is not None else None
    health = assess(heartbeat, pid is not None, log.log_end, now, settings, started_at_s=started_at,
                    behind_since_s=progress["since_s"] if progress else None)
    return Observation(replace(health, pid=pid), heartbeat, log.log_end, progress)


def supervise(settings: Settings, target: Target, start: bool = True) -> Health:
    """One supervision round: judge the stream, start it when it is down (if ``start``), alert when unhealthy.

    Blind, it starts nothing: without the log end neither lag nor a restart can be judged. Rewound, it stops the
    stream and starts nothing: going on would skip or reread records. Idle (never started, and its topic not
    created yet), it starts and pages nothing."""
    now = time.time()
    seen = observe(settings, target, now)
    health = seen.health
    if health.status == "rewound":
        stopped = stop_stream(settings, target) if health.pid is not None else False
        health = replace(health, detail=f"{health.detail}; "
                                        f"{'stopped the stream' if stopped else 'the stream is not running'}, "
                                        "started nothing")
    elif health.status not in ("blind", "idle"):
        _write_progress(settings, target, seen.progress)
        if health.status in ("down", "stopped") and start:
            health = _restart(settings, target, health, now)
    return _tell_on_call(settings, target, health, seen.log_end, *window_alerts(seen.heartbeat, settings, target))


def _restart(settings: Settings, target: Target, health: Health, now: float) -> Health:
    """Start the stream; the restarts within the crash-loop window decide whether this one is a crash loop."""
    new_pid = start_stream(settings, target)
    earlier = _read_json(_restarts_path(settings, target)) or []
    restarts = [*recent_restarts(earlier, now, settings.crash_loop_window_s), now]
    _restarts_path(settings, target).write_text(json.dumps(restarts))
    looping = len(restarts) >= settings.crash_loop_restarts
    return replace(health, status="crash-loop" if looping else "started", pid=new_pid,
                   detail=f"{health.detail}; started pid {new_pid} (restart {len(restarts)} within "
                          f"{settings.crash_loop_window_s}s), log {log_path(settings, target)}")


def _tell_on_call(settings: Settings, target: Target, health: Health, log_end: dict[int, int],
                  *more: Alert | None) -> Health:
    """Page the verdict if it is a condition (and any ``more`` condition), and resolve every incident of an earlier
    round that has cleared."""
    alerts = [a for a in (alert_for(health, settings, target, log_end), *more) if a is not None]
    resolve_cleared(settings, f"stream:{target.name}:", [a.dedup_key for a in alerts], "supervisor",
                    f"the stream is now {health.status}: {health.detail}")
    for alert in alerts:
        dispatch(settings, alert)
    return health


def log_or_why_not(settings: Settings, topic: str) -> tuple[LogState | None, str]:
    """The topic as the broker has it, and why it cannot be read: None when the broker cannot be reached, a log
    without partitions when the topic is gone or was never created."""
    from kafka.errors import KafkaError

    try:
        log = read_log(settings, topic)
    except (PlatformError, KafkaError) as exc:
        return None, f"cannot read the log end of {topic} from {settings.kafka_bootstrap_servers}: {exc}"
    if not log.offsets:
        return log, (f"topic {topic} has no partitions on {settings.kafka_bootstrap_servers} (deleted, or never "
                     "created)")
    return log, ""


def _write_progress(settings: Settings, target: Target, progress: dict | None) -> None:
    path = _progress_path(settings, target)
    if progress is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(progress))
