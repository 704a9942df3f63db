"""The SQL endpoint: Spark's Thrift Server (HiveServer2 protocol, JDBC/ODBC) over the shared catalog.

Any SQL client reads the platform's tables and views by name here: beeline, a JDBC tool such as DBeaver, or dbt's
``thrift`` target. It is a Spark driver like the platform's own apps, started with the same session settings (Delta,
the shared catalog, the jars), so ``serving.*``, ``gold.*`` and the dbt marts resolve exactly as they do in the
platform's processes. Each statement resolves its views in the catalog when it runs, so a session that stays open
sees a serving swap without reconnecting. It listens on ``sql_host`` only, and its pid file and log live under
``run_dir`` and ``log_dir``. Its Spark settings come from the caller (``io.spark_session.sql_endpoint_conf``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import Settings
from spark_apps.services.catalog_server import require_running
from spark_apps.services.daemon import Daemon
from spark_apps.services.processes import port_in_use, spark_home

SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
STOP_TIMEOUT_S = 60.0


def jdbc_url(settings: Settings) -> str:
    """What an analyst's JDBC client connects to."""
    return f"jdbc:hive2://{settings.sql_host}:{settings.sql_port}/default"


class SqlEndpoint:
    """Starts the Thrift Server in the background, waits until it accepts connections, stops it cleanly."""

    def __init__(self, settings: Settings, stop_with_parent: bool = False) -> None:
        self.settings = settings
        self.stop_with_parent = stop_with_parent
        self.log_file = settings.log_dir / "sql-endpoint.log"
        # An argument only our endpoint's process has (pids are recycled): its warehouse setting.
        self.daemon = Daemon("SQL endpoint", settings.run_dir / "sql-endpoint.pid",
                             f"spark.sql.warehouse.dir={settings.warehouse_dir}", self.log_file, STOP_TIMEOUT_S)

    @property
    def address(self) -> str:
        return f"{self.settings.sql_host}:{self.settings.sql_port}"

    def pid(self) -> int | None:
        """The pid of our running endpoint, or None."""
        return self.daemon.pid()

    def answers(self) -> bool:
        return port_in_use(self.settings.sql_host, self.settings.sql_port)

    def start(self, conf: Mapping[str, str]) -> None:
        """Start the endpoint with the Spark settings ``conf`` unless it already runs; return once it accepts
        connections."""
        if self.pid() is not None:
            return
        require_running(self.settings)
        if self.answers():
            raise PlatformError(f"port {self.settings.sql_port} on {self.settings.sql_host} is taken by another "
                                "process; stop it or set KAPPA_SQL_PORT to a free port")
        self.settings.warehouse_dir.mkdir(parents=True, exist_ok=True)
        home = spark_home()
        # The daemon's marker is on the command line whatever conf the caller gave.
        conf = {**conf, "spark.sql.warehouse.dir": str(self.settings.warehouse_dir)}
        arguments = [argument for key, value in conf.items() for argument in ("--conf", f"{key}={value}")]
        process = self.daemon.launch(
            [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--name", "kappa-sql-endpoint",
             *arguments, "spark-internal",
             "--hiveconf", f"hive.server2.thrift.bind.host={self.settings.sql_host}",
             "--hiveconf", f"hive.server2.thrift.port={self.settings.sql_port}",
             "--hiveconf", "hive.server2.transport.mode=binary"],
            output=self.log_file,
            env={**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": self.settings.spark_driver_bind_address},
            stop_with_parent=self.stop_with_parent)
        if not self.daemon.wait_ready(process, self.answers, self.settings.sql_start_timeout_s, PlatformError,
                                      every_s=0.5):
            self.stop()
            raise PlatformError(f"the SQL endpoint did not accept connections on {self.address} within "
                                f"{self.settings.sql_start_timeout_s:.0f}s; see {self.log_file}")

    def stop(self) -> bool:
        """Stop the endpoint (SIGTERM, then SIGKILL after a timeout). True if it was running."""
        return self.daemon.stop()


def beeline_command(settings: Settings, *arguments: str) -> list[str]:
    """Spark's own beeline against the endpoint, e.g. ``beeline_command(settings, "-e", "SHOW TABLES")``."""
    return [str(spark_home() / "bin" / "beeline"), "-u", jdbc_url(settings), "--silent=true", *arguments]
