"""The chaos suite (``kappa chaos``, ``make chaos``): real faults against the real broker and stream processes.

Every scenario gets its own topic and its own home (warehouse, checkpoint, heartbeat) under ``<chaos_dir>/labs``,
runs the streaming job as separate ``kappa stream`` processes while the pipeline's own generator produces its hard
cases (duplicates, conflicting re-sends, malformed records, late events), injects one kind of fault, lets the stream
catch up, and then must pass both checks:

- the reconciliation: the batch recompute from Kafka equals every stream table (``auditor.audit``);
- the checker: ``lost=0 duplicated=0 unexpected=0`` against the generator's manifests (``checker``).

Any pipeline that declares a generator (``Pipeline.generator``) can be put through the lab (``kappa chaos
--pipeline P``); the marketplace is the default.

Scenarios:

- ``kill_stream``: ``kill -9`` of the stream's process group (Python driver and JVM) at random moments after its
  query started (seeded), and every third kill by the fault hook at a named point of ``foreachBatch``: between the
  table commits and between the last Delta commit and Spark's commit log (``before_checkpoint_commit``);
- ``broker_restart``: the broker stopped and started while the producer sends and the stream reads;
- ``zombie_writer``: a second instance on the same checkpoint while the first writes; it must be fenced out;
- ``concurrent_optimize``: ``kappa maintain`` rounds (compaction of the store in epochs of one batch, OPTIMIZE of
  every table) while the stream appends; both sides retry a conflicting commit a bounded number of times
  (logged), and neither may fail;
- ``disk_full``: a warehouse write fails with ENOSPC inside a micro-batch (injected, see ``faults``): the job must
  fail with that one line, the batch must stay unpublished (not in ``stream.commits`` nor Spark's commit log,
  which is where readers align), and the stream must be exact once space returns;
- ``checkpoint_deleted``: the job must refuse to start rather than reprocess the log into the tables.

Waits have generous limits: they guard against hangs, not against a slow machine.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_apps.core.errors import PlatformError, first_line
from spark_apps.core.object_path import Location, ObjectPath, remove_tree
from spark_apps.core.settings import LOCATION_FIELDS, Settings
from spark_apps.core.waiting import poll, wait_for
from spark_apps.io import delta_log, lineage
from spark_apps.io.catalog import table_path
from spark_apps.lab.checker import CheckResult, check_tables, detail_lines, summary_line
from spark_apps.lab.scenario import ChaosPlan, ScenarioResult
from spark_apps.pipeline.declaration import Pipeline
from spark_apps.pipeline.synthetic import GeneratorRequest, Manifest
from spark_apps.pipeline.target import Target
from spark_apps.services.processes import free_port
from spark_apps.stream.faults import STAGES
from spark_apps.target.resolution import declared

log = logging.getLogger(__name__)

# Hook-driven kills walk these points of foreachBatch, the commit-log gap first.
HOOK_STAGES = tuple(reversed(STAGES))
# Every HOOK_EVERY-th kill is hook-driven, the others land at random moments.
HOOK_EVERY = 3
# Producer pace (records per second) of the scenarios that produce while the stream runs.
FEED_RATE = 15.0
# A producer run lasts about this long (at most BURST records); every run writes its own manifest (its own seed,
# so its own event ids), and stopping the feeder waits for the current run only.
BURST_S, BURST = 20.0, 200
# Records produced before a hook-driven kill when the stream has consumed everything (the kill needs a batch).
TOP_UP = 60
# How long the broker stays down in broker_restart.
OUTAGE_S = 10.0
# Until a launch has reported a micro-batch, random kills spread over this many seconds after its query started.
FIRST_BATCH_GUESS_S = 30.0
# A random kill first lets its launch commit up to this many micro-batches, so that kills reach past batch 0.
MAX_BATCHES_BEFORE_KILL = 2
START_TIMEOUT_S = 900.0
RUN_TIMEOUT_S = 1800.0
STOP_TIMEOUT_S = 300.0


class ScenarioFailed(PlatformError):
    """A scenario's expectation did not hold; the message says which and what happened instead."""


# ---- one scenario's world -------------------------------------------------------------------------------------------


@dataclass
class Lab:
    """One scenario's topic, home and processes, and what was produced into it."""

    name: str
    settings: Settings
    spark: Any
    target: Target
    seed: int
    logs: Path
    broker: Any = None
    manifests: list[Manifest] = field(default_factory=list)
    processes: list[StreamProcess] = field(default_factory=list)
    feeders: list[Feeder] = field(default_factory=list)
    kill_log: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    batch_seconds: list[float] = field(default_factory=list)
    launches: int = 0
    # Kill moments and fault stages; producer seeds are counted instead, so a feeder thread drawing them at its
    # own pace cannot change the kill moments of a seed.
    rng: random.Random = field(init=False)
    started: float = field(default_factory=time.monotonic)
    _producer_runs: int = 0
    _produce_lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.pipeline.require_generator("the chaos lab")

    @property
    def pipeline(self) -> Pipeline:
        return self.target.pipeline

    @property
    def topic(self) -> str:
        return self.target.topic

    @property
    def checkpoint(self) -> Location:
        return self.target.checkpoint

    @property
    def records(self) -> int:
        return sum(m.total_records for m in self.manifests)

    def note(self, message: str) -> None:
        log.info("chaos %s: %s", self.name, message)
        self.notes.append(f"+{time.monotonic() - self.started:.0f}s {message}")

    def produce(self, events: int, rate: float | None = None) -> None:
        """Send ``events`` records of the pipeline's generator (plenty of every hard case) with a seed of their own;
        keep the manifest."""
        from spark_apps.io.producer import produce

        with self._produce_lock:
            self._producer_runs += 1
            seed = self.seed * 1000 + self._producer_runs
        request = GeneratorRequest(seed=seed, events=events, base_time_ms=int(time.time()) * 1000,
                                   events_per_second=rate,
                                   allowed_lateness_s=self.pipeline.lateness_rule(self.settings).allowed_s,
                                   hard_cases=True)
        result = produce(self.settings, self.pipeline, request, topic=self.topic, rate=rate, show_progress=False)
        with self._produce_lock:
            self.manifests.append(result.manifest)
        log.info("chaos %s: %s", self.name, result.summary(self.topic, None))

    def launch(self, *args: str, fault: str = "", max_offsets_per_trigger: int | None = None) -> StreamProcess:
        """Start ``kappa stream *args`` with this lab's settings, a fault hook and another batch size if given."""
        self.launches += 1
        batch_size = max_offsets_per_trigger or self.settings.max_offsets_per_trigger
        settings = self.settings.with_overrides(fault_inject=fault, max_offsets_per_trigger=batch_size)
        process = StreamProcess(self, f"{self.name}-{self.launches:02d}", args, settings)
        self.processes.append(process)
        return process

    def planned(self) -> list[int]:
        return lineage.planned_batches(self.checkpoint)

    def committed(self) -> list[int]:
        return lineage.committed_batches(self.checkpoint)

    def caught_up(self) -> bool:
        """Spark's commit log covers the whole log: every record produced so far went through a micro-batch."""
        return lineage.caught_up(self.settings, self.checkpoint, self.topic)

    def batch_estimate_s(self) -> float:
        return statistics.median(self.batch_seconds) if self.batch_seconds else FIRST_BATCH_GUESS_S

    def record_kill(self, kind: str, process: StreamProcess, **detail: Any) -> None:
        planned, committed = self.planned(), self.committed()
        in_flight = bool(planned) and (not committed or planned[-1] > committed[-1])
        entry = {"kind": kind, "launch": process.label, "after_launch_s": round(process.age_s(), 1),
                 "batch_in_flight": planned[-1] if in_flight else None,
                 "batches_committed": len(committed), **detail}
        self.kill_log.append(entry)
        where = f"in batch {entry['batch_in_flight']}" if in_flight else "between micro-batches"
        what = f"at {detail['stage']} of batch {detail['batch']}" if kind == "hook" else where
        self.note(f"kill {len(self.kill_log)}: -9 ({kind}) {what}, {entry['after_launch_s']}s after launch")

    def stop_everything(self) -> None:
        for feeder in self.feeders:
            feeder.stop_soon()
        for process in self.processes:
            process.kill9()


class StreamProcess:
    """One ``kappa stream`` process of a lab, in a session of its own so that kill -9 reaches its JVM too."""

    def __init__(self, lab: Lab, label: str, args: Sequence[str], settings: Settings) -> None:
        self.lab, self.label = lab, label
        self._group_killed = False
        self.log_path = lab.logs / f"{label}.log"
        self.started_epoch = time.time()
        env = {**os.environ, **settings.as_env()}
        with open(self.log_path, "wb") as out:
            self.popen = subprocess.Popen([sys.executable, "-m", "spark_apps.cli", "stream", *args], stdout=out,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                          env=env)
        fault = settings.fault_inject
        command = " ".join(["kappa stream", *args, *([f"with fault {fault}"] if fault else [])])
        lab.note(f"launched {label} (pid {self.pid}): {command}")

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def age_s(self) -> float:
        return time.time() - self.started_epoch

    def heartbeat(self) -> dict:
        """This launch's heartbeat (a leftover of an earlier launch does not count)."""
        from spark_apps.ops.supervisor import read_heartbeat

        beat = read_heartbeat(self.lab.settings, self.lab.target) or {}
        return beat if beat.get("written_at_epoch_s", 0) >= self.started_epoch else {}

    def wait_started(self) -> None:
        """Until the query runs (its first heartbeat), which is after the job took the fence and checked its
        checkpoint."""
        wait_for(lambda: bool(self.heartbeat()) or not self.alive(), f"{self.label} to start its query",
                 START_TIMEOUT_S)
        if not self.alive():
            raise ScenarioFailed(f"{self.label} exited with {self.popen.returncode} before its query started: "
                                 f"{self.error()}")

    def wait(self, timeout_s: float = RUN_TIMEOUT_S) -> int:
        try:
            code = self.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise ScenarioFailed(f"{self.label} did not exit within {timeout_s:.0f}s; see {self.log_path}") from None
        self.learn_batch_time()
        self._kill_group()
        return code

    def kill9(self) -> None:
        """SIGKILL the whole process group at once: the Python driver and its Spark JVM."""
        if self.alive():
            self.learn_batch_time()
            self._kill_group()
        self.popen.wait()
        self._kill_group()

    def stop(self) -> int:
        """SIGTERM: the job stops its query between micro-batches and exits 0."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        return self.wait(STOP_TIMEOUT_S)

    def error(self) -> str:
        """The CLI's one-line error, else the log's last line."""
        lines = [line.strip() for line in self.log_path.read_text(errors="replace").splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("kappa stream: error:")]
        return (errors or lines or ["(no output)"])[-1]

    def log_count(self, text: str) -> int:
        return self.log_path.read_text(errors="replace").count(text)

    def _kill_group(self) -> None:
        """SIGKILL the group (pgid = our pid) once, while it can still only be ours: right after the leader ended
        (a JVM left behind keeps the group alive) or while it runs; never later, when the id may be reused."""
        if self._group_killed:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self._group_killed = True

    def learn_batch_time(self) -> None:
        seconds = self.heartbeat().get("last_batch_duration_s")
        if seconds:
            self.lab.batch_seconds.append(float(seconds))


class Feeder:
    """The generator producing ``events`` records into a lab's topic at ``rate`` from a background thread, in producer
    runs of ``burst`` records (by default about BURST_S seconds' worth)."""

    def __init__(self, lab: Lab, events: int, rate: float, burst: int | None = None) -> None:
        self.lab, self.events, self.rate = lab, events, rate
        self.burst = burst or max(1, min(BURST, int(rate * BURST_S)))
        self.sent = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"feeder-{lab.name}", daemon=True)
        lab.feeders.append(self)

    def start(self) -> Feeder:
        self._thread.start()
        return self

    def running(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        try:
            while self.sent < self.events and not self._stop.is_set():
                count = min(self.burst, self.events - self.sent)
                self.lab.produce(count, self.rate)
                self.sent += count
        except BaseException as exc:  # noqa: BLE001 - handed to the scenario by finish()
            self.error = exc

    def stop_soon(self) -> None:
        """Produce nothing more after the current producer run (without waiting for it)."""
        self._stop.set()

    def finish(self, stop: bool = False) -> None:
        """Wait for the producer (after its current run, if ``stop``); a producer failure fails the scenario."""
        if stop:
            self.stop_soon()
        self._thread.join(RUN_TIMEOUT_S)
        if self._thread.is_alive():
            raise ScenarioFailed(f"the producer did not finish within {RUN_TIMEOUT_S:.0f}s")
        if self.error is not None:
            raise ScenarioFailed(f"the producer failed: {self.error}")


# ---- building blocks ----------------------------------------------------------------------------------------------


def kill_at_random_moment(lab: Lab, process: StreamProcess | None = None) -> None:
    """kill -9 a running stream (a new continuous launch by default) at a random moment: after it has committed a
    random number (0 to MAX_BATCHES_BEFORE_KILL) of micro-batches of its own, then uniformly within one and a half
    typical micro-batches, so most kills land inside ``foreachBatch`` and they spread over the log rather than all
    hitting the first batch a fresh JVM runs."""
    process = process or lab.launch("--continuous")
    process.wait_started()
    start = len(lab.committed())
    batches = lab.rng.randint(0, MAX_BATCHES_BEFORE_KILL)
    wait_for(lambda: len(lab.committed()) >= start + batches or not process.alive() or lab.caught_up(),
             f"{process.label} to commit {batches} micro-batches", RUN_TIMEOUT_S, 1.0)
    process.learn_batch_time()
    poll(lambda: not process.alive(), lab.rng.uniform(0.0, 1.5 * lab.batch_estimate_s()), every_s=0.1)
    if not process.alive():
        raise ScenarioFailed(f"{process.label} exited with {process.popen.returncode} before its kill: "
                             f"{process.error()}")
    lab.record_kill("random", process, batches_committed_by_launch=len(lab.committed()) - start)
    process.kill9()


def kill_at_stage(lab: Lab, stage: str) -> None:
    """The stream kills itself (SIGKILL, by the fault hook) at ``stage`` of the next micro-batch it runs."""
    if lab.caught_up():
        lab.produce(TOP_UP)
    done = lab.committed()
    batch = done[-1] + 1 if done else 0
    process = lab.launch(fault=f"{stage}@{batch}:kill")
    code = process.wait()
    if code != -signal.SIGKILL:
        raise ScenarioFailed(f"{process.label} was to kill itself at {stage} of batch {batch} but exited with "
                             f"{code}: {process.error()}")
    lab.record_kill("hook", process, stage=stage, batch=batch)


def catch_up(lab: Lab) -> None:
    """Run the stream until it has consumed the log (`kappa stream` without --continuous), in large micro-batches:
    where batches end changes no result (the platform's contract), and each one costs a dozen Delta commits."""
    process = lab.launch(max_offsets_per_trigger=Settings.max_offsets_per_trigger)
    code = process.wait()
    if code != 0:
        raise ScenarioFailed(f"{process.label}, run to catch up, exited with {code}: {process.error()}")


def stop_when_caught_up(lab: Lab, process: StreamProcess) -> None:
    wait_for(lambda: lab.caught_up() or not process.alive(), f"{process.label} to consume the log", RUN_TIMEOUT_S, 2)
    if not process.alive():
        raise ScenarioFailed(f"{process.label} exited with {process.popen.returncode}: {process.error()}")
    code = process.stop()
    if code != 0:
        raise ScenarioFailed(f"{process.label} exited with {code} on SIGTERM: {process.error()}")
    lab.note(f"{process.label} consumed the log and stopped on SIGTERM")


def store_version(lab: Lab) -> int:
    """The latest Delta version of the stream's store (every stream table is a view of it), -1 before its first
    commit (no Spark)."""
    path = table_path(lab.settings, lab.pipeline.tables().store)
    return next(iter(delta_log.commit_versions(path)), -1) if delta_log.has_commits(path) else -1


def batches_in_store(lab: Lab) -> set[int]:
    """The micro-batches the store holds: every stream commit names its batch in ``userMetadata``."""
    path = table_path(lab.settings, lab.pipeline.tables().store)
    if not delta_log.has_commits(path):
        return set()
    return {commit.meta["batch_id"] for commit in delta_log.commits(path) if "batch_id" in commit.meta}


@dataclass(frozen=True)
class Verdict:
    reconciled: bool
    check: CheckResult


def verify(lab: Lab) -> Verdict:
    """The reconciliation (batch recompute from Kafka vs every stream table) and the checker (vs the manifests)."""
    from spark_apps.audit.auditor import audit, summary_lines

    run = audit(lab.spark, lab.settings, lab.target)
    if not run.success:
        log.info("%s", "\n".join(summary_lines(run)))
    result = check_tables(lab.spark, lab.settings, lab.target, lab.manifests)
    for line in detail_lines(result):
        log.info("chaos %s: %s", lab.name, line)
    lab.note(f"reconciliation {'passed' if run.success else 'FAILED'} ({run.position.describe()}); "
             f"checker {summary_line(result)}")
    return Verdict(run.success, result)


# ---- scenarios ----------------------------------------------------------------------------------------------------


def kill_stream(lab: Lab, plan: ChaosPlan) -> None:
    backlog = plan.events // 2
    lab.produce(backlog)
    feeder = Feeder(lab, plan.events - backlog, rate=max(1.0, (plan.events - backlog) / (plan.kills * 30))).start()
    for i in range(plan.kills):
        if i % HOOK_EVERY == 1:
            kill_at_stage(lab, HOOK_STAGES[(i // HOOK_EVERY) % len(HOOK_STAGES)])
        else:
            kill_at_random_moment(lab)
    feeder.finish(stop=True)
    catch_up(lab)


def broker_restart(lab: Lab, plan: ChaosPlan) -> None:
    if lab.broker is None:
        raise ScenarioFailed("broker_restart needs a broker of its own (kappa chaos starts one)")
    process = lab.launch("--continuous")
    process.wait_started()
    # One producer run for all records: its idempotent producer must ride out the outage (a new one could not
    # even bootstrap while the broker is down). The broker goes down a third into it, with the stream reading.
    feeder = Feeder(lab, plan.events, FEED_RATE, burst=plan.events).start()
    time.sleep(plan.events / FEED_RATE / 3)
    if not (feeder.running() and process.alive()):
        raise ScenarioFailed(f"the producer or the stream ended before the broker restart: {process.error()}")
    lab.broker.stop()
    lab.note(f"broker stopped while producing and consuming; down for {OUTAGE_S:.0f}s")
    time.sleep(OUTAGE_S)
    lab.broker.start()
    lab.note("broker started again")
    feeder.finish()
    if not process.alive():
        lab.note(f"{process.label} ended during the outage ({process.error()}); restarted as the supervisor would")
        process = lab.launch("--continuous")
    stop_when_caught_up(lab, process)


def zombie_writer(lab: Lab, plan: ChaosPlan) -> None:
    lab.produce(plan.events // 2)
    feeder = Feeder(lab, plan.events - plan.events // 2, FEED_RATE).start()
    first = lab.launch("--continuous")
    first.wait_started()
    second = lab.launch("--continuous")
    code = second.wait(START_TIMEOUT_S)
    refusal = second.error()
    if code != 1 or "another instance" not in refusal or f"pid {first.pid}" not in refusal:
        raise ScenarioFailed(f"the second instance was not fenced out (exit {code}): {refusal}")
    if not first.alive():
        raise ScenarioFailed(f"the first instance died next to the second: {first.error()}")
    lab.note(f"second instance refused: {refusal}")
    feeder.finish()
    stop_when_caught_up(lab, first)


def concurrent_optimize(lab: Lab, plan: ChaosPlan) -> None:
    from spark_apps.ops.maintenance import maintain

    # Epochs of one batch: every round's compaction then replaces the partitions of batches the stream finished
    # while it appends the next ones, the race this scenario is for.
    lab.settings = lab.settings.with_overrides(compaction_epoch_batches=1)
    lab.produce(plan.events // 3)
    feeder = Feeder(lab, plan.events - plan.events // 3, FEED_RATE).start()
    process = lab.launch("--continuous")
    process.wait_started()
    conflicts = _Counter("conflicted with a concurrent commit")
    logging.getLogger("spark_apps.io.delta_writes").addHandler(conflicts)
    rounds = compactions = folded = 0
    try:
        while feeder.running() or rounds < 2 or not lab.caught_up():
            if not process.alive():
                raise ScenarioFailed(f"the stream died next to maintenance: {process.error()}")
            report = maintain(lab.spark, lab.settings, lab.target, optimize=True, vacuum=False)
            failed = [f"{t.table}: {t.error}" for t in report.tables if t.error]
            if failed:
                raise ScenarioFailed(f"OPTIMIZE failed next to the stream: {'; '.join(failed)}")
            rounds += 1
            compactions += sum(t.files_after < t.files_before for t in report.tables)
            folded += len(report.compactions)
    finally:
        logging.getLogger("spark_apps.io.delta_writes").removeHandler(conflicts)
    feeder.finish()
    stop_when_caught_up(lab, process)
    lab.note(f"{rounds} rounds next to the stream folded a gold table {folded} times and OPTIMIZE compacted a "
             f"table {compactions} times; conflicts "
             f"retried: {conflicts.count} by maintenance, "
             f"{process.log_count('conflicted with a concurrent commit')} by the stream")


# The stages a full disk can fail a write of the batch at: after ``after_parse`` the batch's one commit to the store
# has succeeded, so what is left is Spark's own commit log (the kill scenarios).
DISK_FULL_STAGES = ("after_parse",)


def disk_full(lab: Lab, plan: ChaosPlan) -> None:
    lab.produce(plan.events)
    stage, batch = lab.rng.choice(DISK_FULL_STAGES), 1
    process = lab.launch(fault=f"{stage}@{batch}:enospc")
    code = process.wait()
    failure = process.error()
    if code != 1 or "No space left on device" not in failure:
        raise ScenarioFailed(f"a full disk at {stage} of batch {batch} did not fail the job clearly (exit {code}): "
                             f"{failure}")
    lab.note(f"disk full at {stage} of batch {batch}: {failure}")
    if batch in batches_in_store(lab) or batch in lab.committed():
        raise ScenarioFailed(f"batch {batch} was published although a write of it failed")
    lab.note(f"batch {batch} is neither in {lab.pipeline.tables().store} (a batch is one commit of it) nor in "
             f"Spark's commit log, so readers (auditor, serving) still align on batch {batch - 1}")
    catch_up(lab)
    lab.note(f"space returned: the stream replayed batch {batch} and caught up")


def checkpoint_deleted(lab: Lab, plan: ChaosPlan) -> None:
    lab.produce(plan.events)
    catch_up(lab)
    before = store_version(lab)
    remove_tree(lab.checkpoint)
    lab.note(f"deleted the checkpoint {lab.checkpoint}")
    process = lab.launch()
    code = process.wait()
    refusal = process.error()
    if code != 1 or "is missing but" not in refusal:
        raise ScenarioFailed(f"the job did not refuse a deleted checkpoint (exit {code}): {refusal}")
    if store_version(lab) != before or lab.checkpoint.exists():
        raise ScenarioFailed("the refused start changed a table or left a fresh checkpoint behind")
    result = check_tables(lab.spark, lab.settings, lab.target, lab.manifests)
    if not result.exact:
        raise ScenarioFailed(f"the tables changed after the refused start: {summary_line(result)}")
    lab.note(f"refused, tables untouched ({summary_line(result)}): {refusal}")
    process = lab.launch("--reset", "--yes")
    if process.wait() != 0:
        raise ScenarioFailed(f"the documented fix (`kappa stream --reset --yes`) failed: {process.error()}")
    lab.note("rebuilt every stream table from offset 0 with `kappa stream --reset --yes`")


class _Counter(logging.Handler):
    """Counts log records containing a text (the retry warnings of ``delta_writes.with_retries``)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text, self.count = text, 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += self.text in record.getMessage()


SCENARIOS: dict[str, Callable[[Lab, ChaosPlan], None]] = {
    scenario.__name__: scenario
    for scenario in (kill_stream, broker_restart, zombie_writer, concurrent_optimize, disk_full, checkpoint_deleted)}


# ---- running ------------------------------------------------------------------------------------------------------


def new_lab(settings: Settings, spark, name: str, root: Path, seed: int, broker=None,
            max_offsets_per_trigger: int = 500, pipeline: str = "") -> Lab:
    """A scenario's own topic and home under ``root``; ``settings`` name the broker and the jars. ``pipeline`` (a
    name or module:attribute) must declare a generator: the checker's ground truth is its manifests. A pipeline that
    names its own topic is read from that topic (shared by the scenarios, deleted after each); empty means the
    settings' pipeline."""
    from spark_apps.io.topics import ensure_topic

    spec = pipeline or settings.pipeline
    topic = f"chaos.{name}.{int(time.time())}"
    home = root / "labs" / name
    shutil.rmtree(home, ignore_errors=True)
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    lab_settings = settings.with_overrides(
        **moved_home(settings, home), events_topic=topic, kafka_data_dir=settings.kafka_data_dir,
        kafka_bootstrap_servers=settings.kafka_bootstrap_servers, max_offsets_per_trigger=max_offsets_per_trigger,
        trigger_interval_s=1.0, fault_inject="", pipeline=spec,
        **_on_object_store(settings, name))
    target = declared(lab_settings, spec)
    target.pipeline.require_generator("the chaos lab")
    ensure_topic(lab_settings, target.topic)
    return Lab(name, lab_settings, spark, target, seed, logs, broker=broker)


def moved_home(settings: Settings, home: Path) -> dict[str, Path]:
    """Overrides that move the folders generated under ``settings``' home to ``home``, and keep what a lab shares
    with the session that starts it: the fetched jars, and the embedded S3 server's folder with the secret key it
    generated (else a lab on object storage signs with no key)."""
    return {"home": home, "spark_jars_dir": settings.spark_jars_dir, "kafka_jars_dir": settings.kafka_jars_dir,
            "s3_dir": settings.s3_dir}


def _on_object_store(settings: Settings, name: str) -> dict[str, Location]:
    """A lab's own warehouse and checkpoints in the bucket, in a folder of their own per run, when the settings keep
    them on object storage; local ones follow the lab's home."""
    return {setting: getattr(settings, setting) / "labs" / f"{name}-{int(time.time())}"
            for setting in sorted(LOCATION_FIELDS) if isinstance(getattr(settings, setting), ObjectPath)}


def run_scenario(name: str, lab: Lab, plan: ChaosPlan) -> ScenarioResult:
    """Run one scenario, then the reconciliation and the checker; any failure is recorded, not raised."""
    started = time.monotonic()
    log.info("chaos %s: starting", name)
    verdict, error = None, ""
    try:
        SCENARIOS[name](lab, plan)
        verdict = verify(lab)
    except Exception as exc:  # one broken scenario must not hide the others' results
        error = first_line(exc)
        if not isinstance(exc, PlatformError):
            log.exception("chaos %s: unexpected error", name)
        lab.note(f"FAILED: {error}")
    finally:
        lab.stop_everything()
    check = verdict.check if verdict else None
    return ScenarioResult(
        name=name, passed=bool(verdict and verdict.reconciled and check.exact) and not error,
        kills=len(lab.kill_log), records=lab.records, launches=lab.launches,
        duration_s=round(time.monotonic() - started, 1), reconciled=verdict.reconciled if verdict else None,
        lost=check.lost if check else None, duplicated=check.duplicated if check else None,
        unexpected=check.unexpected if check else None, notes=list(lab.notes), kill_log=list(lab.kill_log),
        check=check.as_json() if check else None, error=error)


def _max_offsets(name: str, plan: ChaosPlan) -> int:
    """Small micro-batches where faults must land in many of them and where OPTIMIZE needs many small files to
    compact; a few larger ones elsewhere (each micro-batch costs a dozen Delta commits)."""
    many = name in ("kill_stream", "concurrent_optimize")
    return max(50, plan.events // 10) if many else max(100, plan.events // 2)


def run_chaos(settings: Settings, plan: ChaosPlan) -> list[ScenarioResult]:
    """Start a broker of its own (free ports, under ``chaos_dir``) and a Spark session, run every scenario of the
    plan in its own lab, write ``results.json`` and ``report.html``. Labs of passed scenarios are deleted at the
    end (not before: the session's catalog still names their tables until the next lab re-points them)."""
    from spark_apps.io.spark_session import get_spark
    from spark_apps.io.topics import admin_client
    from spark_apps.lab.chaos_report import write_reports
    from spark_apps.services.broker import EmbeddedBroker
    from spark_apps.services.catalog_server import CatalogServer

    root = settings.chaos_dir
    root.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(root / "logs", ignore_errors=True)
    port = free_port()
    base = settings.with_overrides(
        **moved_home(settings, root / "session"), chaos_dir=root, kafka_data_dir=root / "broker", kafka_port=port,
        kafka_controller_port=free_port(), kafka_bootstrap_servers=f"{settings.kafka_host}:{port}",
        catalog_port=free_port())
    shutil.rmtree(base.kafka_data_dir, ignore_errors=True)
    shutil.rmtree(base.catalog_dir, ignore_errors=True)
    broker = EmbeddedBroker(base, stop_with_parent=True)
    catalog = CatalogServer(base, stop_with_parent=True)
    log.info("chaos: starting a broker of its own on %s and a catalog on %s", broker.bootstrap_servers, catalog.address)
    broker.start()
    catalog.start()
    started = time.time()
    results: list[ScenarioResult] = []
    passed_labs: list[Path] = []
    try:
        spark = get_spark(base, app_name="kappa-chaos")
        for index, name in enumerate(plan.scenarios):
            lab = new_lab(base, spark, name, root, plan.seed + index, broker, _max_offsets(name, plan), plan.pipeline)
            result = run_scenario(name, lab, plan)
            results.append(result)
            log.info("chaos: %s", result.line())
            with admin_client(lab.settings) as admin:
                admin.delete_topics([lab.topic])
            if result.passed:
                passed_labs.append(lab.settings.home)
            write_reports(root, plan, results, time.time() - started)
    finally:
        broker.stop()
        catalog.stop()
        for path in (*passed_labs, base.kafka_data_dir, base.home):
            shutil.rmtree(path, ignore_errors=True)
    return results
