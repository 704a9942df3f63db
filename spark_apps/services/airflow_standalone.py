"""This machine's Airflow (``kappa airflow start|stop|status``): SQLite, LocalExecutor, loopback only.

It runs what ``airflow standalone`` runs (a migrated metadata database, then the API server, the
scheduler, the DAG processor and the triggerer) with the platform's environment, with one change:
standalone's scheduler and triggerer each start a log server on every interface (the host is
hard-coded in ``airflow.utils.serve_logs``), so they run with ``--skip-serve-logs`` and one log
server for both listens on the loopback address instead. Every process joins one process group,
recorded in a pid file, so ``stop`` ends all of them and only them.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import Settings
from spark_apps.core.waiting import poll
from spark_apps.services.airflow_env import ADMIN_USER, airflow_environment
from spark_apps.services.processes import cmdline, group_members, groups_of_tree, port_in_use, read_pid

START_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 30.0
# What Airflow's processes create (airflow.cfg with its secrets, the database, logs) is readable by its owner only.
PRIVATE_UMASK = 0o077
HEALTH_PATH = "/api/v2/monitor/health"
HEALTHY_COMPONENTS = ("metadatabase", "scheduler", "triggerer", "dag_processor")


class AirflowError(PlatformError):
    """Airflow could not be started, reached or stopped."""


@dataclass(frozen=True)
class Running:
    """A started Airflow: where to open it and how to log in."""

    url: str
    process_group: int
    user: str
    password_file: Path
    log: Path


def components(settings: Settings) -> dict[str, list[str]]:
    """The command line of every process, by name; each binds only ``settings.airflow_host``."""
    airflow = [sys.executable, "-m", "airflow"]
    host = settings.airflow_host
    return {
        "api-server": [*airflow, "api-server", "--host", host, "--port", str(settings.airflow_port)],
        "scheduler": [*airflow, "scheduler", "--skip-serve-logs"],
        "dag-processor": [*airflow, "dag-processor"],
        "triggerer": [*airflow, "triggerer", "--skip-serve-logs"],
        "log-server": [sys.executable, "-m", "uvicorn", "--factory", "airflow.utils.serve_logs.log_server:get_app",
                       "--host", host, "--port", str(settings.airflow_log_server_port), "--no-access-log"],
    }


def is_healthy(health: dict) -> bool:
    """Ready as standalone means it: the database answers and scheduler, triggerer and DAG processor heartbeat."""
    return all((health.get(name) or {}).get("status") == "healthy" for name in HEALTHY_COMPONENTS)


def url(settings: Settings) -> str:
    return f"http://{settings.airflow_host}:{settings.airflow_port}"


def pid_file(settings: Settings) -> Path:
    return settings.run_dir / "airflow.pid"


def log_file(settings: Settings) -> Path:
    return settings.log_dir / "airflow.log"


def start(settings: Settings) -> Running:
    """Start Airflow unless it runs already; return once the API server reports every component healthy."""
    launched = running_group(settings) is None
    if launched:
        for port in (settings.airflow_port, settings.airflow_log_server_port):
            if port_in_use(settings.airflow_host, port):
                raise AirflowError(f"port {port} on {settings.airflow_host} is taken by another process; stop it "
                                   "or set KAPPA_AIRFLOW_PORT / KAPPA_AIRFLOW_LOG_SERVER_PORT to free ports")
        _launch(settings)
    try:
        _wait_until_healthy(settings)
    except BaseException:
        if launched:
            stop(settings)
        raise
    return Running(url=url(settings), process_group=running_group(settings), user=ADMIN_USER,
                   password_file=password_file(settings), log=log_file(settings))


def password_file(settings: Settings) -> Path:
    return Path(airflow_environment(settings)["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"])


def private_home(settings: Settings) -> None:
    """Airflow's home holds the login, the Fernet key and the JWT secret (airflow.cfg) and the metadata database:
    the folder is 0700 and its files 0600, however they were created."""
    home = settings.airflow_home
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o700)
    for path in home.iterdir():
        if path.is_file():
            path.chmod(0o600)
    passwords = password_file(settings)
    if not passwords.exists():
        # Written here, Airflow reads the login instead of generating one and printing it into its log.
        descriptor = os.open(passwords, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            json.dump({ADMIN_USER: secrets.token_urlsafe(18)}, file)


def _launch(settings: Settings) -> None:
    env = {**os.environ, **airflow_environment(settings)}
    for folder in (settings.log_dir, settings.run_dir):
        folder.mkdir(parents=True, exist_ok=True)
    private_home(settings)
    with open(log_file(settings), "ab") as log:
        migrated = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env, stdout=log,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, check=False,
                                  umask=PRIVATE_UMASK)
        if migrated.returncode != 0:
            raise AirflowError(f"migrating the Airflow database failed; see {log_file(settings)}")
        group = 0
        for command in components(settings).values():
            process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, process_group=group, umask=PRIVATE_UMASK)
            group = group or process.pid
    pid_file(settings).write_text(f"{group}\n")


def _wait_until_healthy(settings: Settings) -> None:
    last = None

    def healthy() -> bool:
        nonlocal last
        if running_group(settings) is None:
            raise AirflowError(f"Airflow exited while starting; see {log_file(settings)}")
        last = health(settings) or last
        return last is not None and is_healthy(last)

    if poll(healthy, START_TIMEOUT_S, every_s=1):
        return
    raise AirflowError(f"Airflow was not healthy at {url(settings)} within {START_TIMEOUT_S:.0f}s "
                       f"({json.dumps(last) if last else 'no answer'}); see {log_file(settings)}")


def health(settings: Settings) -> dict | None:
    """What the API server says about each component, or None when it does not answer."""
    try:
        with urllib.request.urlopen(url(settings) + HEALTH_PATH, timeout=5) as response:
            return json.load(response)
    except (urllib.error.URLError, OSError, ValueError):
        return None


def running_group(settings: Settings) -> int | None:
    """The process group of our running Airflow, or None (a stale pid file is removed)."""
    group = read_pid(pid_file(settings))
    if group is None:
        return None
    if any("airflow" in " ".join(cmdline(pid)) for pid in group_members(group)):
        return group
    pid_file(settings).unlink(missing_ok=True)
    return None


def stop(settings: Settings) -> bool:
    """Stop every process of the group and of the task groups under it (SIGTERM, then SIGKILL after a timeout):
    a running task's `kappa reconcile` and its JVM end with Airflow instead of writing on after `make down`.
    True if it was running."""
    group = running_group(settings)
    if group is None:
        return False
    # Read before any signal: a task whose supervisor ends first is re-parented and no longer found under it.
    groups = groups_of_tree(group)
    for sig, patience in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, 10.0)):
        # Only groups with members left: an emptied group's id may already lead someone else's new session.
        for member_group in [g for g in groups if group_members(g)]:
            try:
                os.killpg(member_group, sig)
            except ProcessLookupError:
                pass
        if poll(lambda: not any(group_members(g) for g in groups), patience, every_s=0.2):
            break
    pid_file(settings).unlink(missing_ok=True)
    return True
