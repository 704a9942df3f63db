"""The stream's own compaction, in a process of its own at the lowest CPU priority, as Paimon's dedicated
compaction job runs beside its writers.

Why a process and not a thread of the stream: a run costs a few seconds of a core whatever it folds (snapshot, file
listing, the window queries, the commit), and in the stream's JVM it took them from the micro-batches. Spark's fair
scheduler cannot stop it: it never takes a core back from a running task, and the driver's threads, the JIT and the
garbage collector of one JVM share its cores alike. Linux's scheduler can: a process at ``nice`` 19 gets about 1.5%
of a core the stream wants, and all of one it leaves. At 1,000 events/s, with runs in the window, p99 from log to
gold was 6.8 s with the thread and 4.7 s with the process (docs/scaling.md).

The two ends speak over the child's standard streams: the stream writes a line to ask for a run; the child answers
each with one line, prefixed ``ANSWER``, of what it compacted (or why it failed), and ends when its input does.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
import threading

from spark_apps.core.errors import first_line
from spark_apps.core.settings import PROJECT_ROOT, Settings
from spark_apps.pipeline.target import Target
from spark_apps.stream.compaction import Compaction

log = logging.getLogger(__name__)
ANSWER = "kappa-compaction "
# Every stage of the child's session one task: a run never holds more than one core.
ONE_TASK_CONF = {"spark.sql.shuffle.partitions": "1", "spark.sql.leafNodeDefaultParallelism": "1",
                 "spark.sql.files.maxPartitionBytes": str(1 << 30)}


class StreamCompaction:
    """The stream's compaction of its store, as Hudi's and Paimon's writers compact theirs: each time a micro-batch
    opens a new epoch (the one before it is finished), a run of ``compaction.compact`` over the tables worth it
    (``compaction_tail_ratio``), in the child process (started at the first run, kept for the next). One run at a
    time: an epoch that opens during a run starts the next one after it. A failed run is a warning, and the next
    epoch tries again. It never changes what a view returns, so the micro-batches neither wait for it nor know of
    it."""

    def __init__(self, settings: Settings, target: Target) -> None:
        self.settings = settings
        self.target = target
        self.started_for = 0
        self.running = False
        self.process: subprocess.Popen | None = None
        self.reader: threading.Thread | None = None
        self.niceness: int | None = None
        self.done: list[Compaction] = []

    def batch_written(self, batch_id: int) -> None:
        epoch = batch_id // self.settings.compaction_epoch_batches
        if epoch <= self.started_for or self.running:
            return
        if self.process is None or self.process.poll() is not None:
            self._start()
            if self.process is None:
                return
        self.started_for = epoch
        self.running = True
        try:
            self.process.stdin.write("compact\n")
            self.process.stdin.flush()
        except OSError as exc:
            self.running = False
            log.warning("the compaction process of %s is gone; the next epoch starts another: %s",
                        self.target.tables.store, first_line(exc))

    def wait(self) -> None:
        """Let the run that is going finish (its commit is whole either way), then let the process end."""
        if self.process is None:
            return
        if self.process.stdin and not self.process.stdin.closed:
            try:
                self.process.stdin.close()
            except OSError:
                pass
        self.process.wait()
        self.reader.join()

    def _start(self) -> None:
        """Start the child from a thread that lives as long as it, which reads its answers: Linux ends a child
        with the thread that started it (``terminate_with_parent``), and the micro-batch's thread is Spark's. No
        ``preexec_fn``: Python code in a fork of a driver could run py4j's finalizers on the driver's sockets."""
        started = threading.Event()
        self.reader = threading.Thread(target=self._serve, args=(started,), daemon=True,
                                       name=f"compaction of {self.target.tables.store}")
        self.reader.start()
        started.wait()

    def _serve(self, started: threading.Event) -> None:
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", __name__, self.target.spec, self.target.generation],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=PROJECT_ROOT,
                env={**os.environ, **self.settings.as_env()})
        except OSError as exc:
            self.process = None
            log.warning("the compaction process of %s did not start; the next epoch tries again: %s",
                        self.target.tables.store, first_line(exc))
            return
        finally:
            started.set()
        for line in self.process.stdout:
            if line.startswith(ANSWER):
                self._answered(json.loads(line[len(ANSWER):]))
            elif line.strip():
                log.info("compaction process: %s", line.rstrip())
        if self.running:
            log.warning("the compaction process of %s ended during a run (exit %s); the next epoch starts another",
                        self.target.tables.store, self.process.wait())
            self.running = False

    def _answered(self, answer: dict) -> None:
        if "niceness" in answer:
            self.niceness = answer["niceness"]
            return
        if "failed" in answer:
            log.warning("the stream's compaction of %s failed; the next epoch tries again: %s",
                        self.target.tables.store, answer["failed"])
        self.done += [Compaction(**each) for each in answer.get("done", ())]
        self.running = False


def serve(settings: Settings, target: Target, requests, answers) -> None:
    """The child's loop: a run of ``compact`` for each line of ``requests``, each answered on ``answers``."""
    from spark_apps.io.spark_session import get_spark
    from spark_apps.stream.compaction import compact

    _answer(answers, {"niceness": os.nice(0)})
    spark = None
    for _ in requests:
        try:
            if spark is None:
                spark = get_spark(settings, f"kappa-compaction-{target.name}")
                for key, value in ONE_TASK_CONF.items():
                    spark.conf.set(key, value)
            done = compact(spark, settings, target, settings.compaction_tail_ratio)
            _answer(answers, {"done": [dataclasses.asdict(each) for each in done]})
        except Exception as exc:  # noqa: BLE001 - the views are whole either way; the next epoch tries again
            _answer(answers, {"failed": first_line(exc)})


def _answer(answers, answer: dict) -> None:
    answers.write(ANSWER + json.dumps(answer) + "\n")
    answers.flush()


def main(argv: list[str]) -> None:
    """``python -m spark_apps.stream.compactor <pipeline spec> <generation>``, settings from the environment. What
    Spark and the libraries print goes to standard error, so standard output carries the answers only."""
    from spark_apps.services.processes import terminate_with_parent
    from spark_apps.target.resolution import declared

    terminate_with_parent()
    settings = Settings.from_env()
    os.nice(settings.compaction_nice)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s compaction %(message)s")
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    spec, generation = argv
    serve(settings, declared(settings, spec, generation), sys.stdin, answers)


if __name__ == "__main__":
    main(sys.argv[1:])
