"""This machine's Airflow: one environment from the settings, loopback only, everything under airflow_home."""

import json
import stat
from pathlib import Path

from spark_apps.core.settings import PROJECT_ROOT, Settings
from spark_apps.services.airflow_env import airflow_environment
from spark_apps.services.airflow_standalone import components, is_healthy, password_file, private_home

SETTINGS = Settings(home=Path("/srv/kappa"), airflow_port=18080, airflow_log_server_port=18793)


def test_every_address_airflow_binds_or_calls_is_loopback():
    env = airflow_environment(SETTINGS)
    assert env["AIRFLOW__API__HOST"] == "127.0.0.1"
    assert env["AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_HOST"] == "127.0.0.1"
    assert env["AIRFLOW__API__BASE_URL"] == "http://127.0.0.1:18080"
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://127.0.0.1:18080/execution/"
    log_ports = {env["AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"], env["AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT"]}
    assert log_ports == {"18793"}
    hosts = {name: argv[argv.index("--host") + 1] for name, argv in components(SETTINGS).items() if "--host" in argv}
    assert hosts == {"api-server": "127.0.0.1", "log-server": "127.0.0.1"}


def test_scheduler_and_triggerer_leave_log_serving_to_the_loopback_log_server():
    commands = components(SETTINGS)
    assert "--skip-serve-logs" in commands["scheduler"] and "--skip-serve-logs" in commands["triggerer"]
    log_server = commands["log-server"]
    assert "airflow.utils.serve_logs.log_server:get_app" in log_server
    assert log_server[log_server.index("--port") + 1] == "18793"
    assert set(commands) == {"api-server", "scheduler", "dag-processor", "triggerer", "log-server"}


def test_state_lives_under_airflow_home_and_dags_come_from_the_repository():
    env = airflow_environment(SETTINGS)
    home = Path("/srv/kappa/airflow")
    assert env["AIRFLOW_HOME"] == str(home)
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == f"sqlite:///{home}/airflow.db"
    assert Path(env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]).parent == home
    assert Path(env["AIRFLOW__LOGGING__BASE_LOG_FOLDER"]).parent == home
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == str(PROJECT_ROOT / "dags")
    assert env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "False"
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] == "admin:admin"


def test_tasks_see_the_same_settings_as_the_command_line():
    env = airflow_environment(SETTINGS)
    assert Settings.from_env(env) == SETTINGS


def test_ready_means_database_scheduler_triggerer_and_dag_processor_healthy():
    healthy = {name: {"status": "healthy"} for name in ("metadatabase", "scheduler", "triggerer", "dag_processor")}
    assert is_healthy(healthy)
    assert not is_healthy({**healthy, "triggerer": {"status": "unhealthy"}})
    assert not is_healthy({"metadatabase": {"status": "healthy"}})


def test_airflow_home_is_private_and_the_login_is_generated_once_without_being_printed(tmp_path, capsys):
    settings = Settings(home=tmp_path)
    settings.airflow_home.mkdir()
    leaky = settings.airflow_home / "airflow.cfg"
    leaky.write_text("[core]\nfernet_key = x\n")
    leaky.chmod(0o644)
    private_home(settings)
    login = json.loads(password_file(settings).read_text())
    private_home(settings)

    assert stat.S_IMODE(settings.airflow_home.stat().st_mode) == 0o700
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in settings.airflow_home.iterdir()} == {
        "airflow.cfg": 0o600, password_file(settings).name: 0o600}
    assert set(login) == {"admin"} and len(login["admin"]) >= 20
    assert json.loads(password_file(settings).read_text()) == login, "kept across starts"
    assert login["admin"] not in capsys.readouterr().out
