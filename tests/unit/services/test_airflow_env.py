"""This machine's Airflow: one environment from the settings, loopback only, everything under airflow_home."""

from pathlib import Path

from spark_apps.core.settings import PROJECT_ROOT, Settings
from spark_apps.services.airflow_env import airflow_environment
from spark_apps.services.airflow_standalone import components, is_healthy

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
