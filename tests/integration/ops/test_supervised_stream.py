"""The supervisor as Airflow runs it: it starts a real `kappa stream --continuous` process, reads its heartbeat
and the real broker's log end, and alerts through the outbox.

The pipeline is given as ``module:attribute``, as a user's own is: the supervisor restarts the stream with that
spec, and finds its files (pid, log, heartbeat) by the pipeline's name, as the stream writes them."""

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from spark_apps.core.paths import heartbeat_path
from spark_apps.core.waiting import poll
from spark_apps.io.producer import produce
from spark_apps.io.topics import describe_log
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.ops.supervisor import (
    lag_by_partition,
    log_path,
    pid_path,
    read_heartbeat,
    stop_stream,
    stream_process_alive,
    supervise,
)
from spark_apps.pipeline.synthetic import GeneratorRequest
from spark_apps.target.resolution import declared

pytestmark = pytest.mark.integration


SPEC = "spark_apps.marketplace.pipeline:PIPELINE"


@pytest.fixture
def supervised(make_topic, settings, tmp_path):
    """Settings of their own home and a two-partition topic, with the marketplace pipeline given by its module; the
    stream the test starts is stopped afterwards."""
    topic = make_topic(f"test.supervise.{uuid.uuid4().hex[:8]}", 2)
    own = settings.with_overrides(home=tmp_path, events_topic=topic, max_lag_records=50, trigger_interval_s=1.0,
                                  spark_driver_memory="1g", pipeline=SPEC)
    yield own
    stop_stream(own, declared(own))


def produce_events(settings, seed: int, total: int) -> dict[int, int]:
    produce(settings, PIPELINE, GeneratorRequest(seed=seed, events=total, base_time_ms=int(time.time()) * 1000),
            show_progress=False)
    return describe_log(settings).log_end


def wait_until_caught_up(settings, target, log_end: dict[int, int], timeout_s: float = 480) -> None:
    """A hang guard, not a speed limit: alone, the JVM start, tables and first batch take about 90 s; next to
    other Spark jobs on two cores, several minutes."""
    def caught_up() -> bool:
        assert stream_process_alive(settings, target), log_path(settings, target).read_text()[-3000:]
        lag = lag_by_partition(read_heartbeat(settings, target), log_end, settings)
        return lag is not None and not any(lag.values())

    if not poll(caught_up, timeout_s, every_s=1):
        pytest.fail(f"the stream did not catch up within {timeout_s}s: "
                    f"{log_path(settings, target).read_text()[-3000:]}")


def outbox_alerts(settings) -> list[tuple[str, str]]:
    lines = settings.alerts_outbox.read_text().splitlines() if settings.alerts_outbox.exists() else []
    return [(record["severity"], record["dedup_key"]) for record in map(json.loads, lines)]


def test_supervisor_starts_the_stream_and_tells_ok_down_and_lagging_apart(supervised):
    key = "stream:marketplace"
    target = declared(supervised)
    assert (target.spec, target.name) == (SPEC, "marketplace")
    log_end = produce_events(supervised, seed=31, total=200)

    started = supervise(supervised, target)
    assert started.status == "started" and stream_process_alive(supervised, target)
    assert outbox_alerts(supervised) == [("warning", f"{key}:started")]

    wait_until_caught_up(supervised, target, log_end)
    assert read_heartbeat(supervised, target) == json.loads(heartbeat_path(supervised, "marketplace").read_text()), \
        "the supervisor reads the heartbeat the stream writes, named after the pipeline"
    ok = supervise(supervised, target)
    assert (ok.status, ok.pid, ok.lag_records) == ("ok", started.pid, 0), ok.detail
    assert ok.heartbeat_age_s < 30
    assert outbox_alerts(supervised)[-1] == ("info", f"{key}:started"), "the restart's incident is resolved"
    assert "batch 0: " in log_path(supervised, target).read_text()

    assert stop_stream(supervised, target)
    assert not stream_process_alive(supervised, target) and not pid_path(supervised, target).exists()
    assert read_heartbeat(supervised, target)["query_active"] is False
    behind = produce_events(supervised, seed=32, total=100)
    new_records = sum(behind.values()) - sum(log_end.values())
    assert new_records > supervised.max_lag_records

    down = supervise(supervised, target, start=False)
    assert (down.status, down.pid, down.lag_records) == ("down", None, new_records), down.detail
    assert not stream_process_alive(supervised, target)
    assert outbox_alerts(supervised)[-1] == ("critical", f"{key}:down")
    cli = subprocess.run([sys.executable, "-m", "spark_apps.cli", "supervise", "--no-start"], capture_output=True,
                         text=True, timeout=120, env={**os.environ, **supervised.as_env()})
    assert cli.returncode == 1, cli.stderr[-2000:]
    assert cli.stdout.startswith(f"stream marketplace: down (pid -, lag {new_records} records, heartbeat ")

    restarted = supervise(supervised, target)
    lagging = supervise(supervised, target)
    assert restarted.status == "started" and restarted.pid != started.pid
    # The new process has not reported yet: the last committed offsets are behind the log end by the new records.
    assert (lagging.status, lagging.pid, lagging.lag_records) == ("lagging", restarted.pid, new_records)
    assert outbox_alerts(supervised)[-4:] == [("info", f"{key}:down"), ("warning", f"{key}:started"),
                                              ("info", f"{key}:started"), ("warning", f"{key}:lagging")]
