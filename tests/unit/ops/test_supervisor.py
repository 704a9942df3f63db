"""Stream supervision judged from small heartbeats and log ends, without a broker or Spark."""

import json
import os
import sys

import pytest

from spark_apps.alerts import dispatch
from spark_apps.alerts.alert import Alert
from spark_apps.cli import main
from spark_apps.core.errors import BrokerError
from spark_apps.core.paths import heartbeat_path, write_json_whole
from spark_apps.core.settings import Settings
from spark_apps.io.topics import LogState
from spark_apps.ops import supervisor
from spark_apps.ops.supervisor import (
    Health,
    alert_for,
    assess,
    dead_letter_alert,
    future_event_alert,
    is_stream_of,
    lag_by_partition,
    pid_path,
    recent_restarts,
    stream_command,
    stream_process_alive,
    track_progress,
)
from spark_apps.pipeline.target import Target
from spark_apps.target.resolution import declared

NOW = 1_800_000_000.0
TOPIC = "shop.events"


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(home=tmp_path, events_topic=TOPIC, stream_stall_s=600, max_lag_records=100)


@pytest.fixture
def target(settings) -> Target:
    return declared(settings)


def beat(committed: dict[int, int] | None, age_s: float = 2.0, active: bool = True, batch: int | None = 3) -> dict:
    """A heartbeat as the stream writes it: Spark's endOffset JSON string, per topic, partitions as strings."""
    end = None if committed is None else json.dumps({TOPIC: {str(p): o for p, o in committed.items()}})
    return {"written_at_epoch_s": NOW - age_s, "query_active": active, "last_batch_id": batch, "end_offsets": end}


def logged(log_end: dict[int, int], topic_id: str = "id-old"):
    """A stand-in for the round's one broker read: the topic with ``log_end`` as its log end."""
    return lambda s, topic: LogState(topic, topic_id, {p: (0, end) for p, end in log_end.items()})


def test_lag_is_the_log_end_minus_the_offsets_sparks_last_batch_ended_at(settings):
    heartbeat = beat({0: 90, 1: 100})
    assert lag_by_partition(heartbeat, {0: 100, 1: 100, 2: 5}, settings) == {0: 10, 1: 0, 2: 5}
    as_dict = {**heartbeat, "end_offsets": {TOPIC: {"0": 90, "1": 100}}}
    assert lag_by_partition(as_dict, {0: 100, 1: 100, 2: 5}, settings) == {0: 10, 1: 0, 2: 5}


def test_lag_is_measured_on_the_topic_the_stream_reports_even_when_it_is_not_the_events_topic(settings):
    heartbeat = {**beat(None), "end_offsets": json.dumps({"own.topic": {"0": 7}})}
    assert supervisor.stream_topic(heartbeat, settings) == "own.topic"
    assert lag_by_partition(heartbeat, {0: 10}, settings) == {0: 3}


def test_lag_is_unknown_before_the_stream_reports_progress(settings):
    health = assess(beat(None), True, {0: 50}, NOW, settings)
    assert (health.status, health.lag_records, health.lag_by_partition) == ("ok", None, {})
    assert health.detail == "no progress reported yet"


def test_a_caught_up_stream_with_a_fresh_heartbeat_is_ok(settings):
    health = assess(beat({0: 100, 1: 40}), True, {0: 100, 1: 40}, NOW, settings)
    assert health == Health("ok", 0, {0: 0, 1: 0}, 2.0, "caught up")


def test_a_stream_without_its_process_is_down(settings):
    health = assess(beat({0: 100}, age_s=300, active=False), False, {0: 130}, NOW, settings)
    assert (health.status, health.lag_records) == ("down", 30)
    assert health.detail == "no stream process is running (last heartbeat 300s ago)"
    assert assess(None, False, {0: 130}, NOW, settings).detail == "no stream process is running (no heartbeat)"


def test_a_stream_whose_last_run_ended_caught_up_as_asked_is_stopped_healthy_and_pages_nobody(settings, target):
    ended = {**beat({0: 100}, age_s=300, active=False), "ended": "caught_up"}
    health = assess(ended, False, {0: 100}, NOW, settings)
    assert (health.status, health.healthy, health.lag_records) == ("stopped", True, 0)
    assert health.detail.startswith("the last run read the log to its end and ended as asked (last heartbeat 300s")
    assert alert_for(health, settings, target, {0: 100}) is None
    assert assess({**ended, "ended": None}, False, {0: 100}, NOW, settings).status == "down"


def test_a_run_that_dies_before_its_first_beat_is_down_not_stopped(settings, target, monkeypatch):
    path = heartbeat_path(settings, target.name)
    write_json_whole(path, {**beat({0: 100}, age_s=300, active=False), "ended": "caught_up"})
    monkeypatch.setattr(supervisor.subprocess, "Popen", lambda *args, **kwargs: type("Started", (), {"pid": 4242}))
    supervisor.start_stream(settings, target)
    assert json.loads(path.read_text())["ended"] is None
    assert assess(json.loads(path.read_text()), False, {0: 100}, NOW, settings).status == "down"


def test_a_killed_stream_whose_last_heartbeat_is_old_is_down(settings):
    assert assess(beat({0: 100}, age_s=120, active=True), False, {0: 100}, NOW, settings).status == "down"


def test_a_stream_started_by_hand_counts_as_running_while_its_heartbeat_is_fresh(settings):
    health = assess(beat({0: 100}, age_s=1), False, {0: 100}, NOW, settings)
    assert health.status == "ok"
    assert health.detail == "caught up; no supervised process, but a fresh heartbeat (started by hand?)"


def test_a_live_process_whose_heartbeat_is_older_than_the_stall_limit_is_stalled(settings):
    health = assess(beat({0: 100}, age_s=601), True, {0: 100}, NOW, settings, started_at_s=NOW - 3600)
    assert (health.status, health.detail) == ("stalled", "no heartbeat for 601s (limit 600s)")


def test_a_heartbeat_left_by_an_earlier_run_does_not_make_a_starting_process_stalled(settings):
    old = beat({0: 100}, age_s=5000, active=False)
    assert assess(old, True, {0: 100}, NOW, settings, started_at_s=NOW - 60).status == "ok"
    assert assess(old, True, {0: 100}, NOW, settings, started_at_s=NOW - 700).status == "stalled"
    assert assess(None, True, {0: 100}, NOW, settings, started_at_s=NOW - 700).status == "stalled"


def test_a_stream_behind_without_a_completed_batch_for_the_stall_limit_is_stalled(settings):
    heartbeat = beat({0: 100})
    busy = assess(heartbeat, True, {0: 150}, NOW, settings, behind_since_s=NOW - 30)
    stuck = assess(heartbeat, True, {0: 150}, NOW, settings, behind_since_s=NOW - 900)
    assert busy.status == "ok"
    assert (stuck.status, stuck.detail) == ("stalled", "no micro-batch completed for 900s while 50 records behind "
                                                       "(limit 600s)")


def test_a_caught_up_stream_is_not_stalled_however_long_it_idled(settings):
    assert assess(beat({0: 100}), True, {0: 100}, NOW, settings, behind_since_s=NOW - 9000).status == "ok"


def test_lag_beyond_the_threshold_is_lagging(settings):
    at_limit = assess(beat({0: 0, 1: 0}), True, {0: 60, 1: 40}, NOW, settings)
    beyond = assess(beat({0: 0, 1: 0}), True, {0: 61, 1: 40}, NOW, settings)
    assert (at_limit.status, at_limit.detail) == ("ok", "100 records behind")
    assert (beyond.status, beyond.lag_records, beyond.detail) == ("lagging", 101, "101 records behind the log end "
                                                                                   "(limit 100)")


def test_progress_is_tracked_from_the_first_look_at_a_stream_behind_until_a_batch_completes():
    first = track_progress(None, 7, 3, 50, NOW)
    assert first == {"pid": 7, "last_batch_id": 3, "since_s": NOW}
    assert track_progress(first, 7, 3, 80, NOW + 300) == first
    assert track_progress(first, 7, 4, 80, NOW + 300)["since_s"] == NOW + 300
    assert track_progress(first, 8, 3, 80, NOW + 300)["since_s"] == NOW + 300
    assert track_progress(first, 7, 3, 0, NOW + 300) is None
    assert track_progress(None, 7, None, None, NOW) == {"pid": 7, "last_batch_id": None, "since_s": NOW}


@pytest.mark.parametrize(("status", "lag", "severity", "anchor"), [
    ("down", 30, "critical", "stream-down"),
    ("started", 30, "warning", "stream-down"),
    ("stalled", 30, "critical", "stream-stalled"),
    ("lagging", 1000, "warning", "stream-lagging"),
    ("lagging", 1001, "critical", "stream-lagging"),
])
def test_every_unhealthy_status_raises_one_alert_keyed_by_pipeline_and_status(settings, target, status, lag, severity,
                                                                               anchor):
    alert = alert_for(Health(status, lag, {0: lag}, 4.0, "why", pid=12), settings, target, {0: 5000})
    assert (alert.severity, alert.source, alert.dedup_key) == (severity, "supervisor", f"stream:marketplace:{status}")
    assert alert.runbook == f"docs/runbook.md#{anchor}"
    assert alert.offsets == {0: lag}
    assert alert.summary.startswith("stream marketplace ") and alert.summary.endswith(": why")
    assert alert.details["log_file"] == str(settings.log_dir / "stream-marketplace.log")


def test_an_alert_without_a_known_lag_carries_the_log_end_offsets(settings, target):
    alert = alert_for(Health("down", None, {}, None, "gone"), settings, target, {0: 5000, 1: 4000})
    assert alert.offsets == {0: 5000, 1: 4000}


def test_a_healthy_stream_raises_no_alert(settings, target):
    assert alert_for(Health("ok", 0, {0: 0}, 1.0, "caught up"), settings, target, {0: 10}) is None


def test_only_the_stream_command_line_of_the_pipeline_is_taken_for_the_stream(target):
    assert is_stream_of([sys.executable, *stream_command("marketplace")], target)
    assert not is_stream_of([sys.executable, *stream_command("other_pipeline:PIPELINE")], target)
    assert not is_stream_of([sys.executable, "-m", "spark_apps.cli", "supervise"], target)
    assert not is_stream_of([], target)


def test_a_stream_started_under_another_spec_of_the_same_pipeline_is_taken_for_it(target):
    assert is_stream_of([sys.executable, *stream_command("spark_apps.marketplace.pipeline:PIPELINE")], target)


def test_a_reused_pid_of_a_live_process_that_is_not_the_stream_is_not_taken_for_it(settings, target):
    pid_path(settings, target).parent.mkdir(parents=True)
    pid_path(settings, target).write_text(f"{os.getpid()}\n")
    assert not stream_process_alive(settings, target)
    assert not supervisor.stop_stream(settings, target)
    assert not pid_path(settings, target).exists()


def test_supervise_starts_a_stream_that_is_down_and_warns(settings, target, monkeypatch):
    alerts, started = [], []
    monkeypatch.setattr(supervisor, "read_log", logged({0: 10}))
    monkeypatch.setattr(supervisor, "start_stream", lambda s, t: started.append(s) or 4242)
    monkeypatch.setattr(dispatch, "deliver", lambda s, alert: alerts.append(alert) or [])
    health = supervisor.supervise(settings, target)
    assert (health.status, health.pid, started) == ("started", 4242, [settings])
    assert [(a.severity, a.dedup_key) for a in alerts] == [("warning", "stream:marketplace:started")]
    assert health.detail.endswith(f"started pid 4242 (restart 1 within 3600s), log "
                                  f"{settings.log_dir / 'stream-marketplace.log'}")


def test_restarts_within_the_window_make_a_crash_loop_that_pages_critical(settings, target, monkeypatch):
    alerts, now = [], [0.0]
    looping = settings.with_overrides(crash_loop_restarts=3, crash_loop_window_s=3600)
    monkeypatch.setattr(supervisor.time, "time", lambda: now[0])
    monkeypatch.setattr(supervisor, "read_log", logged({0: 10}))
    monkeypatch.setattr(supervisor, "start_stream", lambda s, t: s.run_dir.mkdir(parents=True, exist_ok=True) or 4242)
    monkeypatch.setattr(dispatch, "deliver", lambda s, alert: alerts.append(alert) or [])
    statuses = []
    for now[0] in (1000.0, 1600.0, 2200.0, 9000.0):
        statuses.append(supervisor.supervise(looping, target).status)
    assert statuses == ["started", "started", "crash-loop", "started"], "the fourth is an hour after the first two"
    raised = [a for a in alerts if not a.resolves]
    assert [(a.severity, a.dedup_key) for a in raised][2] == ("critical", "stream:marketplace:crash-loop")
    assert raised[2].runbook.endswith("#stream-crash-loop") and "restart 3 within 3600s" in raised[2].summary


def test_an_incident_is_resolved_on_the_first_round_its_condition_no_longer_holds(settings, target, monkeypatch):
    alerts, running = [], []
    monkeypatch.setattr(supervisor, "read_log", logged({0: 10}))
    monkeypatch.setattr(supervisor, "start_stream", lambda s, t: pytest.fail("must not start"))
    monkeypatch.setattr(dispatch, "deliver", lambda s, alert: alerts.append(alert) or [])
    monkeypatch.setattr(supervisor, "stream_pid", lambda s, t: 77 if running else None)
    monkeypatch.setattr(supervisor, "read_heartbeat", lambda s, t: {
        "written_at_epoch_s": supervisor.time.time(), "end_offsets": {"shop.events": {"0": 10}}} if running else None)
    assert supervisor.supervise(settings, target, start=False).status == "down"
    assert supervisor.supervise(settings, target, start=False).status == "down"
    running.append(True)
    pid_path(settings, target).parent.mkdir(parents=True, exist_ok=True)
    pid_path(settings, target).write_text("77\n")
    assert supervisor.supervise(settings, target, start=False).status == "ok"
    assert supervisor.supervise(settings, target, start=False).status == "ok"
    assert [(a.dedup_key, a.resolves) for a in alerts] == [
        ("stream:marketplace:down", False), ("stream:marketplace:down", False), ("stream:marketplace:down", True)]


def healthy_rounds(settings, target, monkeypatch, *heartbeats: dict) -> list[Alert]:
    """One supervision round of a running, caught-up stream per heartbeat, each judged ok; what was dispatched."""
    alerts: list[Alert] = []
    monkeypatch.setattr(supervisor, "read_log", logged({0: 500}))
    monkeypatch.setattr(supervisor, "stream_pid", lambda s, t: 77)
    monkeypatch.setattr(dispatch, "deliver", lambda s, alert: alerts.append(alert) or [])
    monkeypatch.setattr(supervisor.time, "time", lambda: NOW)
    pid_path(settings, target).parent.mkdir(parents=True, exist_ok=True)
    pid_path(settings, target).write_text("77\n")
    for heartbeat in heartbeats:
        (settings.run_dir / "marketplace.heartbeat.json").write_text(json.dumps(heartbeat))
        assert supervisor.supervise(settings, target, start=False).status == "ok"
    return alerts


def windowed(records: int, dead: int) -> dict:
    return {**beat({0: 500}), "window": {"seconds": 900, "records": records, "dead_letters": dead}}


def test_a_window_alert_names_the_table_of_the_pipeline_it_is_about(settings):
    sensors = declared(settings, "tests.support.sensor_pipeline:PIPELINE")
    alert = dead_letter_alert(windowed(1000, 600), settings, sensors)
    assert (alert.dedup_key, alert.table) == ("stream:sensors:dead-letters", "stream.sensors_dead_letters")


def test_a_window_alert_names_the_table_of_the_generation_the_stream_reports(settings, target):
    alert = dead_letter_alert({**windowed(1000, 600), "generation": "g2"}, settings, target)
    assert alert.table == target.pipeline.tables("g2").dead_letters != target.tables.dead_letters


def test_dead_letters_above_their_share_of_the_window_warn_and_above_half_page(settings, target):
    assert dead_letter_alert(windowed(1000, 50), settings, target) is None, "5% is the default limit, not over it"
    warning = dead_letter_alert(windowed(1000, 51), settings, target)
    assert (warning.severity, warning.dedup_key, warning.table) == (
        "warning", "stream:marketplace:dead-letters", "stream.dead_letters")
    assert warning.summary == ("stream marketplace dead-lettered 51 of 1,000 records (5.1%) in the last 900s "
                               "(limit 5.0%)")
    assert warning.runbook.endswith("#dead-letter-ratio") and warning.offsets == {0: 500}
    assert dead_letter_alert(windowed(1000, 1000), settings, target).severity == "critical", \
        "a producer on a new schema"
    assert dead_letter_alert(windowed(99, 99), settings, target) is None, "too few records to judge"
    assert dead_letter_alert(beat({0: 5}), settings, target) is None, "a heartbeat without a window"


def test_a_supervision_round_raises_the_dead_letter_alert_next_to_a_healthy_verdict_and_resolves_it(
        settings, target, monkeypatch):
    alerts = healthy_rounds(settings, target, monkeypatch, windowed(1000, 900), windowed(1000, 0))
    assert [(a.dedup_key, a.severity, a.resolves) for a in alerts] == [
        ("stream:marketplace:dead-letters", "critical", False), ("stream:marketplace:dead-letters", "info", True)]


def test_recent_restarts_keep_only_those_within_the_window():
    assert recent_restarts([50.0, 10.0, 400.0, 100.0], now_s=400.0, window_s=300) == [100.0, 400.0]


def test_supervise_without_start_reports_a_down_stream_and_starts_nothing(settings, target, monkeypatch):
    alerts = []
    monkeypatch.setattr(supervisor, "read_log", logged({0: 10}))
    monkeypatch.setattr(supervisor, "start_stream", lambda s, t: pytest.fail("must not start"))
    monkeypatch.setattr(dispatch, "deliver", lambda s, alert: alerts.append(alert) or [])
    assert supervisor.supervise(settings, target, start=False).status == "down"
    assert [(a.severity, a.dedup_key) for a in alerts] == [("critical", "stream:marketplace:down")]


@pytest.mark.parametrize(("log_end", "why"), [
    (BrokerError("cannot reach Kafka at 127.0.0.1:1"), "cannot read the log end of shop.events from "),
    ({}, "topic shop.events has no partitions on "),
])
def test_supervise_pages_when_it_cannot_read_the_log_and_starts_nothing(settings, target, monkeypatch, log_end, why):
    """The stream ran (it left a heartbeat), then its broker or its topic went away."""
    alerts = []
    monkeypatch.setattr(supervisor, "read_heartbeat", lambda s, t: beat({0: 5}))

    def unreadable(s, topic):
        if isinstance(log_end, Exception):
            raise log_end
        return logged(log_end)(s, topic)

    monkeypatch.setattr(supervisor, "read_log", unreadable)
    monkeypatch.setattr(supervisor, "start_stream", lambda s, t: pytest.fail("must not start"))
    monkeypatch.setattr(dispatch, "deliver", lambda s, alert: alerts.append(alert) or [])
    health = supervisor.supervise(settings, target)
    assert health.status == "blind" and not health.healthy and health.detail.startswith(why)
    assert [(a.severity, a.dedup_key, a.runbook.rsplit("#", 1)[1]) for a in alerts] == [
        ("critical", "stream:marketplace:blind", "stream-blind")]


@pytest.mark.parametrize(("status", "code"), [("ok", 0), ("started", 0), ("down", 1), ("stalled", 1), ("lagging", 1),
                                              ("blind", 1)])
def test_cli_supervise_prints_one_status_line_and_exits_non_zero_when_unhealthy(monkeypatch, capsys, tmp_path,
                                                                                 status, code):
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    calls = []
    monkeypatch.setattr(supervisor, "supervise",
                        lambda s, t, start: calls.append(start) or Health(status, 5, {0: 5}, 3.0, "why", pid=9))
    assert main(["supervise", "--no-start"]) == code
    assert calls == [False]
    assert capsys.readouterr().out == f"stream marketplace: {status} (pid 9, lag 5 records, heartbeat 3s old) - why\n"


def test_cli_supervise_stop_without_a_supervised_stream_says_so(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("KAPPA_HOME", str(tmp_path))
    assert main(["supervise", "--stop"]) == 0
    assert capsys.readouterr().out == "stream marketplace: was not running under the supervisor\n"


@pytest.mark.parametrize(("topic_id_now", "log_end", "why"), [
    ("id-new", {0: 900}, "topic shop.events has id id-new, but the stream read the topic with id id-old"),
    ("id-old", {0: 4}, "the offsets of topic shop.events went backwards (partition 0 ends at 4 but was read to 500)"),
])
def test_a_recreated_topic_pages_critical_stops_the_stream_and_starts_nothing(settings, target, monkeypatch,
                                                                              topic_id_now, log_end, why):
    alerts, stopped = [], []
    monkeypatch.setattr(supervisor, "read_log", logged(log_end, topic_id_now))
    monkeypatch.setattr(supervisor, "stream_pid", lambda s, t: 77)
    monkeypatch.setattr(supervisor, "stop_stream", lambda s, t: stopped.append(s) or True)
    monkeypatch.setattr(supervisor, "start_stream", lambda s, t: pytest.fail("must not start"))
    monkeypatch.setattr(dispatch, "deliver", lambda s, alert: alerts.append(alert) or [])
    monkeypatch.setattr(supervisor, "read_heartbeat", lambda s, t: {**beat({0: 500}), "topic_id": "id-old"})
    health = supervisor.supervise(settings, target)
    assert (health.status, health.healthy, stopped) == ("rewound", False, [settings])
    assert health.detail.startswith(why) and health.detail.endswith("stopped the stream, started nothing")
    assert [(a.severity, a.dedup_key, a.runbook.rsplit("#", 1)[1]) for a in alerts] == [
        ("critical", "stream:marketplace:rewound", "stream-rewound")]


def test_a_heartbeat_without_a_topic_id_is_judged_by_its_offsets_only(settings, target, monkeypatch):
    monkeypatch.setattr(supervisor, "read_log", logged({0: 500}, "id-any"))
    monkeypatch.setattr(dispatch, "deliver", lambda s, alert: [])
    monkeypatch.setattr(supervisor, "read_heartbeat", lambda s, t: beat({0: 500}))
    assert supervisor.supervise(settings, target, start=False).status != "rewound"


def test_observing_a_rewound_topic_reports_it_and_stops_nothing(settings, target, monkeypatch):
    """What `kappa status` shows: the supervisor's verdict, without its actions."""
    monkeypatch.setattr(supervisor, "read_log", logged({0: 900}, "id-new"))
    monkeypatch.setattr(supervisor, "stream_pid", lambda s, t: 77)
    monkeypatch.setattr(supervisor, "stop_stream", lambda s, t: pytest.fail("observing must not stop the stream"))
    monkeypatch.setattr(dispatch, "deliver", lambda s, alert: pytest.fail("observing must not page"))
    monkeypatch.setattr(supervisor, "read_heartbeat", lambda s, t: {**beat({0: 500}), "topic_id": "id-old"})
    seen = supervisor.observe(settings, target, NOW)
    assert (seen.health.status, seen.health.pid, seen.log_end) == ("rewound", 77, {0: 900})
    assert seen.health.detail.startswith("topic shop.events has id id-new, but the stream read the topic with id")


def future(records: int, ahead: int) -> dict:
    return {**beat({0: 500}), "window": {"seconds": 900, "records": records, "dead_letters": 0,
                                         "future_events": ahead}}


def test_events_stamped_past_the_skew_after_their_append_warn_and_page_when_they_are_most_of_the_window(
        settings, target):
    assert future_event_alert(future(1000, 0), settings, target) is None
    assert future_event_alert(beat({0: 5}), settings, target) is None, "a heartbeat without a window"
    warning = future_event_alert(future(1000, 3), settings, target)
    assert (warning.severity, warning.dedup_key, warning.table) == (
        "warning", "stream:marketplace:future-events", "silver.events")
    assert warning.summary == ("stream marketplace read 3 of 1,000 events stamped more than 300s after the broker "
                               "appended them, in the last 900s")
    assert warning.runbook.endswith("#future-events") and warning.offsets == {0: 500}
    assert future_event_alert(future(1000, 501), settings, target).severity == "critical", "a producer's clock is wrong"


def test_a_supervision_round_raises_the_future_event_alert_and_resolves_it_when_the_window_holds_none(
        settings, target, monkeypatch):
    alerts = healthy_rounds(settings, target, monkeypatch, future(1000, 4), future(1000, 0))
    assert [(a.dedup_key, a.severity, a.resolves) for a in alerts] == [
        ("stream:marketplace:future-events", "warning", False), ("stream:marketplace:future-events", "info", True)]


def test_before_its_first_batch_a_stream_of_a_pipeline_with_its_own_topic_is_judged_on_that_topic(
        settings, monkeypatch):
    """Its heartbeat has the topic's id but no offsets yet: the settings' events topic is not the one it reads."""
    asked, stopped = [], []
    sensors = declared(settings, "tests.support.sensor_pipeline:PIPELINE")
    monkeypatch.setattr(supervisor, "read_log", lambda s, topic: asked.append(topic) or LogState(topic, "id-sensors",
                                                                                                  {0: (0, 40)}))
    monkeypatch.setattr(supervisor, "stream_pid", lambda s, t: 77)
    monkeypatch.setattr(supervisor, "stop_stream", lambda s, t: stopped.append(s) or True)
    monkeypatch.setattr(dispatch, "deliver", lambda s, alert: [])
    monkeypatch.setattr(supervisor, "read_heartbeat", lambda s, t: {**beat(None), "topic_id": "id-sensors"})
    pid_path(settings, sensors).parent.mkdir(parents=True, exist_ok=True)
    pid_path(settings, sensors).write_text("77\n")
    health = supervisor.supervise(settings, sensors, start=False)
    assert asked == ["sensors.readings"] and health.status != "rewound" and not stopped


def test_a_pipeline_never_started_whose_topic_does_not_exist_is_idle_and_nothing_is_started_or_paged(
        settings, target, monkeypatch):
    """A fresh home: the built-in pipeline was never deployed, so `kappa status` must not call it unhealthy."""
    alerts = []
    monkeypatch.setattr(supervisor, "read_log", logged({}))
    monkeypatch.setattr(supervisor, "start_stream", lambda s, t: pytest.fail("must not start"))
    monkeypatch.setattr(dispatch, "deliver", lambda s, alert: alerts.append(alert) or [])
    health = supervisor.supervise(settings, target)
    assert (health.status, health.healthy, alerts) == ("idle", True, [])
    assert health.detail.startswith("never started: topic shop.events has no partitions on ")


def test_a_stream_the_supervisor_started_whose_topic_is_gone_is_blind_not_idle(settings, target, monkeypatch):
    """Its log file shows it was deployed: a topic lost since is an incident, not a fresh home."""
    alerts = []
    monkeypatch.setattr(supervisor, "read_log", logged({}))
    monkeypatch.setattr(dispatch, "deliver", lambda s, alert: alerts.append(alert) or [])
    supervisor.log_path(settings, target).parent.mkdir(parents=True, exist_ok=True)
    supervisor.log_path(settings, target).write_text("earlier run\n")
    health = supervisor.supervise(settings, target, start=False)
    assert (health.status, health.healthy) == ("blind", False)
    assert [alert.dedup_key for alert in alerts] == ["stream:marketplace:blind"]
