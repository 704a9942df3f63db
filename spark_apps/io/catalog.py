"""Tables by name, in the shared catalog.

Every table is a Delta table at ``<warehouse>/<schema>.db/<table>``, registered by name in the Hive metastore that
every process shares (``services.catalog_server``): a table one process creates is seen by name by the stream, the
audit, Airflow tasks, dbt and the SQL endpoint. Registering is idempotent, and a name registered at another folder
(another warehouse's table of the same name) is pointed at this warehouse's.

``register_warehouse_tables`` is the recovery tool: it registers every table found in the warehouse folder, for a
catalog database that was lost or a warehouse restored from a copy. It costs one metastore lookup per table.
"""

from __future__ import annotations

import re

from spark_apps.core.errors import PlatformError
from spark_apps.core.object_path import Location
from spark_apps.core.settings import Settings
from spark_apps.io import delta_log
from spark_apps.io.catalog_locks import table_write

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-]+")


def table_path(settings: Settings, table: str) -> Location:
    """Where the Delta table ``schema.name`` lives."""
    schema, name = _split(table)
    return settings.warehouse_dir / f"{schema}.db" / name


def existing_table_path(settings: Settings, table: str) -> Location:
    """Where the Delta table ``schema.name`` lives, or one readable error when there is none."""
    path = table_path(settings, table)
    if not delta_log.has_commits(path):
        raise PlatformError(f"no Delta table {table} at {path}")
    return path


def read_if_present(spark, settings: Settings, table: str):
    """The Delta table ``schema.name`` as a DataFrame, or None while it has no commit: the readers of tables that
    the first write creates (the ledger, the serving state, generations) answer "nothing yet" then, not an error."""
    path = table_path(settings, table)
    if not delta_log.has_commits(path):
        return None
    return spark.read.format("delta").load(str(path))


def read_version(spark, settings: Settings, table: str, version: int):
    """The Delta table ``schema.name`` as it was at ``version``."""
    return spark.read.format("delta").option("versionAsOf", int(version)).load(str(table_path(settings, table)))


def register_warehouse_tables(spark, settings: Settings) -> list[str]:
    """Make every Delta table under the warehouse visible by ``schema.name``; return their names."""
    found = []
    for log_dir in sorted(settings.warehouse_dir.glob("*.db/*/_delta_log")):
        schema = log_dir.parent.parent.name.removesuffix(".db")
        name = f"{schema}.{log_dir.parent.name}"
        register_table(spark, settings, name)
        found.append(name)
    return found


def register_table(spark, settings: Settings, table: str) -> None:
    """Register one existing Delta table by name, pointing a name registered at another folder here instead
    (dropping an external table's name keeps its data)."""
    schema, name = _split(table)
    location = str(table_path(settings, table))
    if not spark.catalog.databaseExists(schema):
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    registered = registered_location(spark, table)
    if registered == location.rstrip("/"):
        return
    if registered is not None:
        _forget(spark, schema, name)
    spark.sql(f"CREATE TABLE {table} USING delta LOCATION '{location}'")


def registered_location(spark, table: str) -> str | None:
    """The folder the catalog has for ``table``, or None when the name is free. Asks the metastore only: the table's
    Delta log is not read, so a name whose folder has since been deleted answers too."""
    schema, name = _split(table)
    external = spark._jsparkSession.sharedState().externalCatalog()
    if not external.tableExists(schema, name):
        return None
    location = external.getTable(schema, name).storage().locationUri()
    if not location.isDefined():
        return None
    uri = location.get()
    local = uri.getScheme() in (None, "file")
    return (uri.getPath() if local else uri.toString()).rstrip("/")


def forget_foreign_tables(spark, settings: Settings, schema: str) -> list[str]:
    """Drop from the catalog the names of ``schema`` registered at folders outside this warehouse (another
    warehouse's tables on the same catalog), so that a tool creating them by name (dbt) creates them here; their data
    stays where it is. Returns the names dropped."""
    external = spark._jsparkSession.sharedState().externalCatalog()
    if not external.databaseExists(schema):
        return []
    names = external.listTables(schema)
    home = str(settings.warehouse_dir).rstrip("/") + "/"
    forgotten = []
    for name in (names.apply(i) for i in range(names.size())):
        location = registered_location(spark, f"{schema}.{name}")
        if location is not None and not location.startswith(home):
            _forget(spark, schema, name)
            forgotten.append(f"{schema}.{name}")
    return forgotten


def _forget(spark, schema: str, name: str) -> None:
    """Drop a name from the catalog and this session's cache of it, without loading the table it names."""
    identifier = spark._jvm.org.apache.spark.sql.catalyst.TableIdentifier(name, spark._jvm.scala.Some(schema))
    spark._jsparkSession.sessionState().catalog().dropTable(identifier, True, False)


def ensure_table(spark, settings: Settings, table: str, schema, partition_by: tuple[str, ...] = (),
                 properties: dict[str, str] | None = None) -> None:
    """Create the Delta table if it does not exist yet, and register it by name. A table that exists is not loaded
    to be ensured: its ``CREATE TABLE IF NOT EXISTS`` would load it only to do nothing."""
    from delta.tables import DeltaTable

    location = table_path(settings, table)
    if not delta_log.has_commits(location):
        builder = DeltaTable.createIfNotExists(spark).location(str(location)).addColumns(schema)
        if partition_by:
            builder = builder.partitionedBy(*partition_by)
        for key, value in (properties or {}).items():
            builder = builder.property(key, value)
        with table_write(spark, settings, location, f"the creation of {table}"):
            builder.execute()
    register_table(spark, settings, table)


def ensure_view(spark, view: str, query: str) -> None:
    """Create the view ``view`` as ``query``, or point it at ``query`` when it reads something else (a name shared
    with another warehouse on the same catalog, or a table of that name from an older layout, whose data stays)."""
    schema, name = _split(view)
    if not spark.catalog.databaseExists(schema):
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    external = spark._jsparkSession.sharedState().externalCatalog()
    if not external.tableExists(schema, name):
        spark.sql(f"CREATE VIEW {view} AS {query}")
        return
    found = external.getTable(schema, name)
    if found.tableType().name() != "VIEW":
        _forget(spark, schema, name)
        spark.sql(f"CREATE VIEW {view} AS {query}")
    elif not found.viewText().isDefined() or found.viewText().get() != query:
        spark.sql(f"ALTER VIEW {view} AS {query}")


def sql_escaped(text: str) -> str:
    """``text`` as the inside of a Spark SQL string literal."""
    return text.replace("\\", "\\\\").replace("'", "\\'")


def repr_sql(text: str) -> str:
    """A Spark SQL string literal."""
    return f"'{sql_escaped(text)}'"


def delta_relation(settings: Settings, table: str) -> str:
    """SQL naming the Delta table of this warehouse by its folder, whatever the catalog's name points at."""
    return "delta.`" + str(table_path(settings, table)).replace("`", "``") + "`"


def _split(table: str) -> tuple[str, str]:
    """``schema.name``, each a plain name: one that holds a path separator would name a folder outside the
    warehouse."""
    parts = table.split(".")
    if len(parts) != 2 or not all(_PLAIN_NAME.fullmatch(part) for part in parts):
        raise PlatformError(f"table names are schema.name (letters, digits, _ and -), got {table!r}")
    return parts[0], parts[1]
