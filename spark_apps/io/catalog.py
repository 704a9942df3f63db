"""A catalog that lives in the warehouse folder itself.

Every table is a Delta table at ``<warehouse>/<schema>.db/<table>``. Each process registers what it
finds there into its session catalog on start, so tables are shared by name across the streaming
job, the batch job, Airflow tasks and dbt, with no metastore process and no metastore lock (an
embedded Derby metastore admits one process at a time, which a long-running stream rules out).
"""

from __future__ import annotations

from pathlib import Path

from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import Settings


def table_path(settings: Settings, table: str) -> Path:
    """Where the Delta table ``schema.name`` lives."""
    schema, name = _split(table)
    return settings.warehouse_dir / f"{schema}.db" / name


def existing_table_path(settings: Settings, table: str) -> Path:
    """Where the Delta table ``schema.name`` lives, or one readable error when there is none."""
    path = table_path(settings, table)
    if not (path / "_delta_log").exists():
        raise PlatformError(f"no Delta table {table} at {path}")
    return path


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
    """Register one existing Delta table in this session's catalog, re-pointing a name that a session
    working with another warehouse registered elsewhere (dropping an external table keeps its data)."""
    schema, _ = _split(table)
    location = str(table_path(settings, table))
    if not spark.catalog.databaseExists(schema):
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    registered = _registered_location(spark, table)
    if registered == location.rstrip("/"):
        return
    if registered is not None:
        spark.sql(f"DROP TABLE {table}")
    spark.sql(f"CREATE TABLE {table} USING delta LOCATION '{location}'")


STALE = "<no Delta table there any more>"


def _registered_location(spark, table: str) -> str | None:
    """Where the catalog has ``table``: its folder, None when the name is free, or ``STALE`` when the folder it names
    no longer holds a Delta table (deleted, or on a filesystem since unmounted); Spark then refuses even to say
    whether the name exists. A stale name is dropped and registered again, like one pointing elsewhere."""
    from pyspark.errors import AnalysisException

    try:
        if not spark.catalog.tableExists(table):
            return None
        return spark.sql(f"DESCRIBE DETAIL {table}").first()["location"].removeprefix("file:").rstrip("/")
    except AnalysisException as exc:
        if "DELTA_PATH_DOES_NOT_EXIST" not in str(exc):
            raise
        return STALE


def ensure_table(spark, settings: Settings, table: str, schema, partition_by: tuple[str, ...] = (),
                 properties: dict[str, str] | None = None) -> None:
    """Create the Delta table if it does not exist yet, and register it by name."""
    from delta.tables import DeltaTable

    builder = DeltaTable.createIfNotExists(spark).location(str(table_path(settings, table))).addColumns(schema)
    if partition_by:
        builder = builder.partitionedBy(*partition_by)
    for key, value in (properties or {}).items():
        builder = builder.property(key, value)
    builder.execute()
    register_table(spark, settings, table)


def _split(table: str) -> tuple[str, str]:
    parts = table.split(".")
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"table names are schema.name, got {table!r}")
    return parts[0], parts[1]
