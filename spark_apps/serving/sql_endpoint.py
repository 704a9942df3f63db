"""The SQL endpoint: Spark's Thrift Server (HiveServer2 protocol, JDBC/ODBC) over the shared catalog.

Any SQL client reads the platform's tables and views by name here: beeline, a JDBC tool such as DBeaver, or dbt's
``thrift`` target. It is a Spark driver like the platform's own apps, started with the same session settings (Delta,
the shared catalog, the jars), so ``serving.*``, ``gold.*`` and the dbt marts resolve exactly as they do in the
platform's processes. Each statement resolves its views in the catalog when it runs, so a session that stays open
sees a serving swap without reconnecting. It listens on ``sql_host`` only, and its pid file and log live under
``run_dir`` and ``log_dir``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import Settings
from spark_apps.core.waiting import poll
from spark_apps.io.spark_session import session_conf, spark_jars
from spark_apps.services.catalog_server import require_running
from spark_apps.services.processes import (
    port_in_use,
    process_alive,
    read_pid,
    runs_with_argument,
    stop_process,
    terminate_with_parent,
)

SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
STOP_TIMEOUT_S = 60.0


def jdbc_url(settings: Settings) -> str:
    """What an analyst's JDBC client connects to."""
    return f"jdbc:hive2://{settings.sql_host}:{settings.sql_port}/default"


def spark_home() -> Path:
    """pyspark's own Spark distribution: its bin/spark-submit and bin/beeline."""
    import pyspark

    return Path(pyspark.__file__).parent


class SqlEndpoint:
    """Starts the Thrift Server in the background, waits until it accepts connections, stops it cleanly."""

    def __init__(self, settings: Settings, stop_with_parent: bool = False) -> None:
        self.settings = settings
        self.stop_with_parent = stop_with_parent
        self.pid_file = settings.run_dir / "sql-endpoint.pid"
        self.log_file = settings.log_dir / "sql-endpoint.log"

    @property
    def address(self) -> str:
        return f"{self.settings.sql_host}:{self.settings.sql_port}"

    def pid(self) -> int | None:
        """The pid of our running endpoint, or None (a stale pid file is removed)."""
        pid = read_pid(self.pid_file)
        if pid is None:
            return None
        if process_alive(pid) and runs_with_argument(pid, self._marker()):
            return pid
        self.pid_file.unlink(missing_ok=True)
        return None

    def answers(self) -> bool:
        return port_in_use(self.settings.sql_host, self.settings.sql_port)

    def start(self) -> None:
        """Start the endpoint unless it already runs; return once it accepts connections."""
        if self.pid() is not None:
            return
        require_running(self.settings)
        if self.answers():
            raise PlatformError(f"port {self.settings.sql_port} on {self.settings.sql_host} is taken by another "
                                "process; stop it or set KAPPA_SQL_PORT to a free port")
        self.settings.warehouse_dir.mkdir(parents=True, exist_ok=True)
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        home = spark_home()
        log = self.log_file.open("ab")
        process = subprocess.Popen(
            [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--name", "kappa-sql-endpoint",
             *self._conf_arguments(), "spark-internal",
             "--hiveconf", f"hive.server2.thrift.bind.host={self.settings.sql_host}",
             "--hiveconf", f"hive.server2.thrift.port={self.settings.sql_port}",
             "--hiveconf", "hive.server2.transport.mode=binary"],
            env={**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1"},
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=terminate_with_parent if self.stop_with_parent else None,
        )
        log.close()
        self.pid_file.write_text(str(process.pid))

        def ready() -> bool:
            if process.poll() is not None:
                raise PlatformError(f"the SQL endpoint exited with code {process.returncode} while starting; "
                                    f"see {self.log_file}")
            return self.answers()

        if not poll(ready, self.settings.sql_start_timeout_s, every_s=0.5):
            self.stop()
            raise PlatformError(f"the SQL endpoint did not accept connections on {self.address} within "
                                f"{self.settings.sql_start_timeout_s:.0f}s; see {self.log_file}")

    def stop(self) -> bool:
        """Stop the endpoint (SIGTERM, then SIGKILL after a timeout). True if it was running."""
        pid = self.pid()
        if pid is None:
            return False
        stop_process(pid, self._marker(), STOP_TIMEOUT_S)
        self.pid_file.unlink(missing_ok=True)
        return True

    def _conf_arguments(self) -> list[str]:
        """The platform's session settings, with Delta and the Kafka connector on the driver's own class path: the
        Thrift Server builds its session catalog (Delta's) before ``spark.jars`` reach its class loader."""
        conf = session_conf(self.settings)
        conf["spark.driver.extraClassPath"] = ":".join(
            [conf["spark.driver.extraClassPath"], *(str(jar) for jar in spark_jars(self.settings))])
        return [argument for key, value in conf.items() for argument in ("--conf", f"{key}={value}")]

    def _marker(self) -> str:
        """An argument only our endpoint's process has (pids are recycled): its warehouse setting."""
        return f"spark.sql.warehouse.dir={self.settings.warehouse_dir}"


def beeline_command(settings: Settings, *arguments: str) -> list[str]:
    """Spark's own beeline against the endpoint, e.g. ``beeline_command(settings, "-e", "SHOW TABLES")``."""
    return [str(spark_home() / "bin" / "beeline"), "-u", jdbc_url(settings), "--silent=true", *arguments]
