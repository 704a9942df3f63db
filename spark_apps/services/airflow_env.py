"""The environment every Airflow process of the platform runs with, derived from the settings alone.

The scheduler, the DAG processor, the triggerer, the API server, the log server, every task and every
test that calls ``airflow`` get the same variables, so they share one SQLite metadata database, one
DAGs folder and one login, listen on loopback only, and see the same ``KAPPA_*`` settings as the CLI.
"""

from __future__ import annotations

from spark_apps.core.settings import PROJECT_ROOT, Settings

DAGS_FOLDER = PROJECT_ROOT / "dags"
SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
ADMIN_USER = "admin"


def airflow_environment(settings: Settings) -> dict[str, str]:
    """``AIRFLOW_HOME``, every ``AIRFLOW__*`` option the platform sets, and the ``KAPPA_*`` settings."""
    home = settings.airflow_home.resolve()
    api = f"http://{settings.airflow_host}:{settings.airflow_port}"
    airflow = {
        "AIRFLOW_HOME": home,
        "AIRFLOW__CORE__DAGS_FOLDER": DAGS_FOLDER,
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        # Airflow 3 runs LocalExecutor on SQLite (standalone picks it too); tasks run in forked workers.
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        # Each task runs a Spark driver or a stream: four at once fill one machine (the default starts 32 workers).
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH_MANAGER,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN_USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": home / "simple_auth_manager_passwords.json.generated",
        # Tasks record this as their host, and the API server fetches a running task's log from
        # http://<host>:<log server port>: the loopback address the log server listens on.
        "AIRFLOW__CORE__HOSTNAME_CALLABLE": "spark_apps.services.airflow_env.loopback_hostname",
        "AIRFLOW__API__HOST": settings.airflow_host,
        "AIRFLOW__API__PORT": settings.airflow_port,
        "AIRFLOW__API__BASE_URL": api,
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{api}/execution/",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": home / "logs",
        # One log server serves the folder every component writes to, for task and triggerer logs alike.
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": settings.airflow_log_server_port,
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": settings.airflow_log_server_port,
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_HOST": settings.airflow_host,
    }
    return {**settings.as_env(), **{key: str(value) for key, value in airflow.items()}}


def loopback_hostname() -> str:
    """Airflow's ``hostname_callable``: every component of this single-machine Airflow is on loopback."""
    return Settings.from_env().airflow_host
