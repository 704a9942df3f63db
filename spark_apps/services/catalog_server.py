"""Lifecycle of the catalog database: an Apache Derby network server holding the Hive metastore.

Every Spark process of the platform (stream, audit, Airflow tasks, dbt, the SQL endpoint) runs Spark's built-in Hive
metastore client against this one database, so a table or view registered by one is seen by name by all. Derby in
network mode admits many processes at once, unlike the embedded Derby that Spark defaults to. It runs from Derby's
own jars (fetched by ``make jars``) as a background JVM bound to the configured host only, with its database, pid
file and log under ``catalog_dir``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import Settings
from spark_apps.services.daemon import Daemon
from spark_apps.services.processes import java_binary, port_in_use

STOP_TIMEOUT_S = 30.0
# The metastore's database inside the server's home; its tables are created by the first client that needs them.
DATABASE = "metastore"
SERVER_CLASS = "org.apache.derby.drda.NetworkServerControl"


class CatalogError(PlatformError):
    """The catalog database is missing, down, or could not start."""


@dataclass(frozen=True)
class CatalogPaths:
    root: Path

    @property
    def pid_file(self) -> Path:
        return self.root / "catalog.pid"

    @property
    def log_file(self) -> Path:
        return self.root / "derby.log"

    @property
    def database_dir(self) -> Path:
        return self.root / DATABASE


def jdbc_url(settings: Settings) -> str:
    """The metastore's JDBC URL, as every Spark process's Hive client connects to it."""
    return f"jdbc:derby://{settings.catalog_host}:{settings.catalog_port}/{DATABASE};create=true"


def client_jars(settings: Settings) -> list[Path]:
    """The Derby client driver a Spark driver needs on its class path to reach the catalog."""
    jars = sorted(settings.catalog_jars_dir.glob("derbyclient-*.jar")) + sorted(
        settings.catalog_jars_dir.glob("derbyshared-*.jar"))
    if len(jars) < 2:
        raise CatalogError(f"the catalog's Derby jars are missing in {settings.catalog_jars_dir}; run `make jars`")
    return jars


class CatalogServer:
    """Starts in the background, waits until it accepts connections, stops cleanly."""

    def __init__(self, settings: Settings, stop_with_parent: bool = False) -> None:
        """``stop_with_parent`` makes the server die with the process that started it (tests), so a killed test
        run never leaves it holding its port."""
        self.settings = settings
        self.paths = CatalogPaths(settings.catalog_dir)
        self.stop_with_parent = stop_with_parent
        # Derby keeps its databases under its system home; the option also tells our server's process apart.
        self.daemon = Daemon("catalog database server", self.paths.pid_file,
                             f"-Dderby.system.home={self.paths.root}", self.paths.log_file, STOP_TIMEOUT_S)

    @property
    def address(self) -> str:
        return f"{self.settings.catalog_host}:{self.settings.catalog_port}"

    def pid(self) -> int | None:
        """The pid of our running server, or None."""
        return self.daemon.pid()

    def answers(self) -> bool:
        """Whether something accepts connections on the catalog's address, whoever started it."""
        return port_in_use(self.settings.catalog_host, self.settings.catalog_port)

    def start(self) -> None:
        """Start the server unless it already runs; return once it accepts connections."""
        if self.pid() is not None:
            return
        if self.answers():
            raise CatalogError(f"port {self.settings.catalog_port} on {self.settings.catalog_host} is taken by "
                               "another process; stop it or set KAPPA_CATALOG_PORT to a free port")
        jars = sorted(self.settings.catalog_jars_dir.glob("derbynet-*.jar"))
        if not jars:
            raise CatalogError(f"the catalog's Derby jars are missing in {self.settings.catalog_jars_dir}; "
                               "run `make jars`")
        self.paths.root.mkdir(parents=True, exist_ok=True)
        process = self.daemon.launch(
            [java_binary(), "-Xmx256m", "-Djava.awt.headless=true", self.daemon.marker,
             f"-Dderby.stream.error.file={self.paths.log_file}",
             "-cp", f"{self.settings.catalog_jars_dir}/*", SERVER_CLASS, "start",
             "-h", self.settings.catalog_host, "-p", str(self.settings.catalog_port), "-noSecurityManager"],
            stop_with_parent=self.stop_with_parent)
        if not self.daemon.wait_ready(process, self.answers, self.settings.catalog_start_timeout_s, CatalogError,
                                      every_s=0.2):
            self.stop()
            raise CatalogError(f"the catalog database server did not accept connections on {self.address} within "
                               f"{self.settings.catalog_start_timeout_s:.0f}s; see {self.paths.log_file}")

    def stop(self) -> bool:
        """Stop the server (SIGTERM, then SIGKILL after a timeout). True if it was running."""
        return self.daemon.stop()


def require_running(settings: Settings) -> None:
    """One readable line, before a Spark session is built, when no catalog answers."""
    if not port_in_use(settings.catalog_host, settings.catalog_port):
        raise CatalogError(f"the catalog database does not answer on {settings.catalog_host}:"
                           f"{settings.catalog_port}; start it with `make up` (or `kappa catalog start`)")
