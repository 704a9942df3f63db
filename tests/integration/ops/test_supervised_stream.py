"""The supervisor as Airflow runs it: it starts a real `kappa stream --continuous` process, reads its heartbeat
and the real broker's log end, and alerts through the outbox."""

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

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

pytestmark = pytest.mark.integration


@pytest.fixture
def supervised(make_topic, settings, tmp_path):
    """Settings of their own home and a two-partition topic; the stream the test starts is stopped afterwards."""
    topic = make_topic(f"test.supervise.{uuid.uuid4().hex[:8]}", 2)
    own = settings.with_overrides(home=tmp_path, events_topic=topic, max_lag_records=50, trigger_interval_s=1.0,
                                  spark_driver_memory="1g")
    yield own
    stop_stream(own)


def produce_events(settings, seed: int, total: int) -> dict[int, int]:
    produce(settings, PIPELINE, GeneratorRequest(seed=seed, events=total, base_time_ms=int(time.time()) * 1000),
            show_progress=False)
    return describe_log(settings).log_end


def wait_until_caught_up(settings, log_end: dict[int, int], timeout_s: float = 480) -> None:
    """A hang guard, not a speed limit: alone, the JVM start, tables and first batch take about 90 s; next to
    other Spark jobs on two cores, several minutes."""
    def caught_up() -> bool:
        assert stream_process_alive(settings), log_path(settings).read_text()[-3000:]
        lag = lag_by_partition(read_heartbeat(settings), log_end, settings)
        return lag is not None and not any(lag.values())

    if not poll(caught_up, timeout_s, every_s=1):
        pytest.fail(f"the stream did not catch up within {timeout_s}s: {log_path(settings).read_text()[-3000:]}")


def outbox_alerts(settings) -> list[tuple[str, str]]:
    lines = settings.alerts_outbox.read_text().splitlines() if settings.alerts_outbox.exists() else []
    return [(record["severity"], record["dedup_key"]) for record in map(json.loads, lines)]


def test_supervisor_starts_the_stream_and_tells_ok_down_and_lagging_apart(supervised):
    key = "stream:marketplace"
    log_end = produce_events(supervised, seed=31, total=200)

    started = supervise(supervised)
    assert started.status == "started" and stream_process_alive(supervised)
    assert outbox_alerts(supervised) == [("warning", f"{key}:started")]

    wait_until_caught_up(supervised, log_end)
    ok = supervise(supervised)
    assert (ok.status, ok.pid, ok.lag_records) == ("ok", started.pid, 0), ok.detail
    assert ok.heartbeat_age_s < 30
    assert outbox_alerts(supervised)[-1] == ("info", f"{key}:started"), "the restart's incident is resolved"
    assert "batch 0: " in log_path(supervised).read_text()

    assert stop_stream(supervised)
    assert not stream_process_alive(supervised) and not pid_path(supervised).exists()
    assert read_heartbeat(supervised)["query_active"] is False
    behind = produce_events(supervised, seed=32, total=100)
    new_records = sum(behind.values()) - sum(log_end.values())
    assert new_records > supervised.max_lag_records

    down = supervise(supervised, start=False)
    assert (down.status, down.pid, down.lag_records) == ("down", None, new_records), down.detail
    assert not stream_process_alive(supervised)
    assert outbox_alerts(supervised)[-1] == ("critical", f"{key}:down")
    cli = subprocess.run([sys.executable, "-m", "spark_apps.cli", "supervise", "--no-start"], capture_output=True,
                         text=True, timeout=120, env={**os.environ, **supervised.as_env()})
    assert cli.returncode == 1, cli.stderr[-2000:]
    assert cli.stdout.startswith(f"stream marketplace: down (pid -, lag {new_records} records, heartbeat ")

    restarted = supervise(supervised)
    lagging = supervise(supervised)
    assert restarted.status == "started" and restarted.pid != started.pid
    # The new process has not reported yet: the last committed offsets are behind the log end by the new records.
    assert (lagging.status, lagging.pid, lagging.lag_records) == ("lagging", restarted.pid, new_records)
    assert outbox_alerts(supervised)[-4:] == [("info", f"{key}:down"), ("warning", f"{key}:started"),
                                              ("info", f"{key}:started"), ("warning", f"{key}:lagging")]
