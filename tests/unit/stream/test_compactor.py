import io
import json

from spark_apps.core.settings import Settings
from spark_apps.stream import compaction
from spark_apps.stream.compaction import Compaction
from spark_apps.stream.compactor import ANSWER, StreamCompaction, serve

RUN = Compaction("gold.t", 1, 2, 59, 100, 10, 1.5)


def test_the_compaction_process_answers_each_run_and_the_stream_reads_what_it_compacted(monkeypatch, tmp_path):
    results = iter([[RUN], RuntimeError("the store moved\n  at a JVM frame")])

    def compact(spark, settings, target, ratio):
        result = next(results)
        if isinstance(result, Exception):
            raise result
        return result

    monkeypatch.setattr(compaction, "compact", compact)
    monkeypatch.setattr("spark_apps.io.spark_session.get_spark", lambda settings, name: _Session())
    settings = Settings(home=tmp_path)
    answers = io.StringIO()
    serve(settings, _Target(), iter(["compact\n", "compact\n"]), answers)
    lines = answers.getvalue().splitlines()
    assert all(line.startswith(ANSWER) for line in lines), lines
    stream = StreamCompaction(settings, _Target())
    for line in lines:
        stream.running = True
        stream._answered(json.loads(line[len(ANSWER):]))
        assert not stream.running or "niceness" in line
    assert stream.done == [RUN]
    assert json.loads(lines[-1][len(ANSWER):]) == {"failed": "the store moved"}


def test_the_stream_asks_for_one_run_per_new_epoch_and_none_while_one_is_running(tmp_path):
    stream = StreamCompaction(Settings(home=tmp_path, compaction_epoch_batches=10), _Target())
    stream.process = _Process()
    for batch in range(35):
        stream.batch_written(batch)
        if batch == 25:
            stream._answered({"done": []})
    assert stream.process.stdin.getvalue() == "compact\n" * 2, "epoch 1 at batch 10, epoch 2 once it was done"
    assert stream.started_for == 2 and stream.running


def test_a_compaction_process_that_cannot_be_restarted_is_not_asked_for_a_run(monkeypatch, tmp_path):
    def refused(*args, **kwargs):
        raise OSError("no more processes")

    monkeypatch.setattr("subprocess.Popen", refused)
    stream = StreamCompaction(Settings(home=tmp_path, compaction_epoch_batches=10), _Target())
    dead = stream.process = _Process(exit_code=1)
    stream.batch_written(10)
    assert stream.process is None and not stream.running and stream.started_for == 0, "the next batch tries again"
    assert dead.stdin.getvalue() == ""


class _Session:
    class conf:  # noqa: N801 - stands in for SparkSession.conf
        @staticmethod
        def set(key, value):
            pass


class _Target:
    name = spec = "marketplace"
    generation = "base"

    class tables:  # noqa: N801 - stands in for TableNames
        store = "stream.micro_batches"


class _Process:
    def __init__(self, exit_code=None):
        self.stdin = io.StringIO()
        self.exit_code = exit_code

    def poll(self):
        return self.exit_code
