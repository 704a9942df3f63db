import dataclasses
from pathlib import Path

import pytest

from spark_apps.cli import main
from spark_apps.core.errors import SettingsError
from spark_apps.core.settings import Settings


def test_defaults_describe_the_embedded_setup():
    settings = Settings.from_env({})
    assert settings.kafka_bootstrap_servers == "127.0.0.1:9092"
    assert settings.warehouse_dir == settings.home / "warehouse"
    assert settings.spark_master.startswith("local")


def test_environment_variables_override_every_kind_of_field():
    settings = Settings.from_env({
        "KAPPA_HOME": "/srv/kappa",
        "KAPPA_KAFKA_PORT": "19092",
        "KAPPA_SPARK_UI_ENABLED": "yes",
        "KAPPA_EVENTS_TOPIC": "shop.events",
        "KAPPA_KAFKA_START_TIMEOUT_S": "2.5",
    })
    assert settings.home == Path("/srv/kappa")
    assert settings.checkpoint_root == Path("/srv/kappa/checkpoints")
    assert settings.kafka_bootstrap_servers == "127.0.0.1:19092"
    assert settings.spark_ui_enabled is True
    assert settings.events_topic == "shop.events"
    assert settings.kafka_start_timeout_s == 2.5


def test_explicit_bootstrap_servers_win_over_host_and_port():
    settings = Settings.from_env({"KAPPA_KAFKA_BOOTSTRAP_SERVERS": "b1:9092,b2:9092", "KAPPA_KAFKA_PORT": "1"})
    assert settings.kafka_bootstrap_servers == "b1:9092,b2:9092"


def test_overriding_home_moves_the_folders_derived_from_it():
    moved = Settings().with_overrides(home=Path("/data/x"), kafka_port=1234)
    assert moved.warehouse_dir == Path("/data/x/warehouse")
    assert moved.kafka_bootstrap_servers == "127.0.0.1:1234"


def test_a_relative_home_or_folder_is_taken_from_the_working_directory_and_kept_absolute(tmp_path, monkeypatch):
    """Every process the platform starts (Airflow's tasks, dbt, the stream's views over ``delta.`<folder>```) gets
    the same absolute folders, wherever it runs."""
    monkeypatch.chdir(tmp_path)
    settings = Settings.from_env({"KAPPA_HOME": "var/mine", "KAPPA_GX_DIR": "../gx"})
    assert settings.home == tmp_path / "var" / "mine"
    assert settings.warehouse_dir == tmp_path / "var" / "mine" / "warehouse"
    assert settings.gx_dir == tmp_path.parent / "gx"
    assert Settings(home=Path("elsewhere")).checkpoint_root == tmp_path / "elsewhere" / "checkpoints"
    monkeypatch.chdir(tmp_path.parent)
    assert Settings.from_env(settings.as_env()) == settings, "a child process started elsewhere finds the same folders"


def test_the_jars_stay_with_the_installation_when_home_moves():
    default = Settings()
    moved = Settings.from_env({"KAPPA_HOME": "/data/x"})
    assert (moved.spark_jars_dir, moved.kafka_jars_dir, moved.spark_class_archive) == (
        default.spark_jars_dir, default.kafka_jars_dir, default.spark_class_archive)
    assert not str(moved.spark_jars_dir).startswith("/data/x")


@pytest.mark.parametrize(("variable", "value", "message"), [
    ("KAPPA_KAFKA_PORT", "abc", "KAPPA_KAFKA_PORT must be an integer, got 'abc'"),
    ("KAPPA_KAFKA_PORT", "70000", "KAPPA_KAFKA_PORT must be a TCP port"),
    ("KAPPA_SPARK_UI_ENABLED", "maybe", "KAPPA_SPARK_UI_ENABLED must be true or false"),
    ("KAPPA_TOPIC_PARTITIONS", "0", "KAPPA_TOPIC_PARTITIONS must be at least 1"),
    ("KAPPA_ALLOWED_LATENESS_S", "-5", "KAPPA_ALLOWED_LATENESS_S must be >= 0"),
    ("KAPPA_TRIGGER_INTERVAL_S", "-5", "KAPPA_TRIGGER_INTERVAL_S must be a finite number of seconds above 0"),
    ("KAPPA_TRIGGER_INTERVAL_S", "nan", "KAPPA_TRIGGER_INTERVAL_S must be a finite number of seconds above 0"),
    ("KAPPA_ALERT_TIMEOUT_S", "inf", "KAPPA_ALERT_TIMEOUT_S must be a finite number of seconds above 0"),
    ("KAPPA_KAFKA_START_TIMEOUT_S", "0", "KAPPA_KAFKA_START_TIMEOUT_S must be a finite number of seconds above 0"),
    ("KAPPA_COMPACTION_NICE", "20", "KAPPA_COMPACTION_NICE must be between 0 and 19, got 20"),
])
def test_a_bad_value_is_refused_with_a_message_naming_the_variable(variable, value, message):
    with pytest.raises(SettingsError, match=message):
        Settings.from_env({variable: value})


def test_cli_reports_a_bad_setting_as_one_line_without_traceback(monkeypatch, capsys):
    monkeypatch.setenv("KAPPA_KAFKA_PORT", "not-a-port")
    assert main(["topic"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == "kappa topic: error: KAPPA_KAFKA_PORT must be an integer, got 'not-a-port'"


def test_cli_reports_a_wrong_argument_as_one_line(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["topic", "--partitions", "zero"])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "expected a whole number, got 'zero'" in err[0]


def test_a_pipelines_window_and_session_gap_are_its_own_not_engine_settings():
    from spark_apps.marketplace.pipeline import SESSION_GAP_S, WINDOW_S

    names = {f.name for f in dataclasses.fields(Settings)}
    assert not names & {"window_s", "session_gap_s"}
    assert (WINDOW_S, SESSION_GAP_S) == (60, 300)
    assert "KAPPA_WINDOW_S" not in Settings().as_env()


def test_secrets_show_as_a_mask_in_repr_and_text_but_reach_child_processes_whole():
    settings = Settings.from_env({"KAPPA_ALERT_PAGERDUTY_ROUTING_KEY": "R0UT1NGKEY",
                                  "KAPPA_ALERT_WEBHOOK_URL": "https://hooks.example.com/T0/S3CR3T"})
    shown = f"{settings!r} {settings} {settings.alert_webhook_url} {settings.alert_pagerduty_routing_key!r}"
    assert "R0UT1NGKEY" not in shown and "S3CR3T" not in shown and "**********" in shown
    assert settings.alert_pagerduty_routing_key.reveal() == "R0UT1NGKEY"
    assert Settings.from_env(settings.as_env()) == settings
    assert settings.with_overrides(alert_webhook_url="http://x/y").alert_webhook_url.reveal() == "http://x/y"
    assert not Settings().alert_slack_webhook_url, "an empty secret is not configured"


@pytest.mark.parametrize("variable", ["KAPPA_KAFKA_HOST", "KAPPA_AIRFLOW_HOST", "KAPPA_SPARK_DRIVER_HOST",
                                      "KAPPA_SPARK_DRIVER_BIND_ADDRESS"])
def test_a_service_address_beyond_loopback_is_refused_unless_remote_is_allowed(variable):
    with pytest.raises(SettingsError, match=f"{variable}=0.0.0.0 would listen beyond this machine.*KAPPA_ALLOW_REMOTE"):
        Settings.from_env({variable: "0.0.0.0"})
    assert Settings.from_env({variable: "0.0.0.0", "KAPPA_ALLOW_REMOTE": "true"}).allow_remote
    for loopback in ("127.0.0.2", "localhost", "::1", "::ffff:127.0.0.1"):
        Settings.from_env({variable: loopback})


def test_a_misspelled_variable_is_said_once_with_the_setting_it_likely_meant(caplog):
    import spark_apps.core.settings as settings_module

    settings_module._WARNED_UNKNOWN.discard("KAPPA_TRIGER_INTERVAL_S")
    environ = {"KAPPA_TRIGER_INTERVAL_S": "9", "KAPPA_KAFKA_PORT": "19092", "OTHER_VARIABLE": "x"}
    with caplog.at_level("WARNING", logger="spark_apps.core.settings"):
        settings = Settings.from_env(environ)
        Settings.from_env(environ)
    warned = [r.getMessage() for r in caplog.records]
    assert warned == ["KAPPA_TRIGER_INTERVAL_S is not a setting (did you mean KAPPA_TRIGGER_INTERVAL_S?); it is "
                      "ignored (docs/settings.md lists them)"]
    assert settings.trigger_interval_s == Settings().trigger_interval_s and settings.kafka_port == 19092


def test_every_variable_a_child_process_gets_is_a_setting(caplog):
    with caplog.at_level("WARNING", logger="spark_apps.core.settings"):
        assert Settings.from_env(Settings().as_env()) == Settings()
    assert not caplog.records


def test_sql_status_refuses_arguments_only_beeline_takes(capsys):
    assert main(["sql", "status", "--bogus"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == ("kappa sql: error: sql status takes no arguments, got '--bogus' (only beeline passes its "
                   "arguments on)")


@pytest.mark.parametrize(("argv", "message"), [
    (["serving", "advance"], "advance needs --run-id"),
    (["serving", "fallback"], "fallback needs --reason"),
])
def test_serving_refuses_a_missing_argument_before_starting_spark(argv, message, capsys, monkeypatch):
    monkeypatch.setattr("spark_apps.io.spark_session.get_spark", lambda *a, **k: pytest.fail("no Spark for a refusal"))
    assert main(argv) == 1
    assert capsys.readouterr().err.strip().startswith(f"kappa serving: error: {message}")


@pytest.mark.parametrize("target", ["folder", "file_under_a_file"])
def test_a_json_path_that_cannot_be_written_is_refused_before_the_command_runs(target, tmp_path, capsys,
                                                                               monkeypatch):
    monkeypatch.setattr("spark_apps.io.spark_session.get_spark", lambda *a, **k: pytest.fail("refused first"))
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    path = tmp_path if target == "folder" else blocker / "out.json"
    with pytest.raises(SystemExit) as exited:
        main(["serving", "status", "--json", str(path)])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--json" in err[0] and str(path) in err[0]


def test_a_json_path_in_a_folder_yet_to_be_made_is_accepted(tmp_path):
    from spark_apps.cli import build_parser

    path = tmp_path / "reports" / "today" / "status.json"
    assert build_parser().parse_args(["status", "--json", str(path)]).json == str(path)
