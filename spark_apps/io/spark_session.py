"""The one way apps get a SparkSession: Delta enabled, local jars, the shared catalog."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from spark_apps.core.errors import PlatformError
from spark_apps.core.object_path import ObjectPath
from spark_apps.core.settings import PROJECT_ROOT, Settings

LOG4J_CONFIG = PROJECT_ROOT / "infra" / "spark" / "log4j2.properties"
# Work over at most this many log records runs interpreted: a micro-batch or a small audit runs a hundred-odd small
# queries, and compiling Java for each cost more than running them on two cores (measured: 39 s -> 22 s per
# 1,000-record micro-batch). Larger work, such as a catch-up batch or a full audit, keeps generated code.
INTERPRETED_MAX_RECORDS = 20_000
QUIET_CLASS_ARCHIVE = "-Xlog:cds=off"
# HotSpot never compiles a method of more than 8,000 bytes of bytecode: it runs in the bytecode interpreter for the
# life of the JVM. The method Spark generates for a stage of many columns is often larger (the parse of a 14-field
# event, six stacked projections, is one: a third of a parse's samples sat in it), so every JVM that runs Spark
# tasks compiles them. Measured on the parse of 2.1M records: 32-33 s -> 23-26 s cold, 28-30 s -> 17 s warm.
JIT_HUGE_METHODS = "-XX:-DontCompileHugeMethods"
CODEGEN_CONFS = ("spark.sql.codegen.wholeStage", "spark.sql.codegen.factoryMode")


def choose_execution(spark, records: int) -> None:
    """Interpreted execution for work over few records, generated code for more; results are the same."""
    interpreted = records <= INTERPRETED_MAX_RECORDS
    spark.conf.set(CODEGEN_CONFS[0], "false" if interpreted else "true")
    spark.conf.set(CODEGEN_CONFS[1], "NO_CODEGEN" if interpreted else "FALLBACK")


@contextmanager
def execution_for(spark, records: int) -> Iterator[None]:
    """``choose_execution`` for the block, then the session's own settings again (it is shared)."""
    before = {key: spark.conf.get(key, None) for key in CODEGEN_CONFS}
    choose_execution(spark, records)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def sql_endpoint_conf(settings: Settings) -> dict[str, str]:
    """The SQL endpoint's Spark settings: the platform's session settings, with Delta and the Kafka connector on the
    driver's own class path, since the Thrift Server builds its session catalog (Delta's) before ``spark.jars``
    reach its class loader."""
    conf = session_conf(settings)
    conf["spark.driver.extraClassPath"] = ":".join(
        [conf["spark.driver.extraClassPath"], *(str(jar) for jar in spark_jars(settings))])
    return conf


def spark_jars(settings: Settings) -> list[Path]:
    """Delta and the Kafka connector, fetched by ``make jars``."""
    jars = sorted(settings.spark_jars_dir.glob("*.jar"))
    names = " ".join(jar.name for jar in jars)
    if "delta-spark_" not in names or "spark-sql-kafka-0-10_" not in names:
        raise PlatformError(f"the Spark jars (Delta, Kafka connector) are missing in {settings.spark_jars_dir}; "
                            "run `make jars`")
    return jars


def class_archive_options(settings: Settings) -> list[str]:
    """The driver JVM's options that map the class archive `make jars` built (``io.class_archive``), when there is
    one. A JVM whose class path or JDK does not match the archive starts as it would without it."""
    archive = settings.spark_class_archive
    return [f"-XX:SharedArchiveFile={archive}", QUIET_CLASS_ARCHIVE] if archive.is_file() else []


def session_conf(settings: Settings) -> dict[str, str]:
    """Spark configuration shared by the apps, the tests and dbt's session connection."""
    return {**_base_conf(settings), **executor_conf(settings)}


def executor_conf(settings: Settings) -> dict[str, str]:
    """Executor sizing and JVM options on a cluster master; a local master runs everything in the driver, so it has
    none. The jars of ``spark.jars`` reach the executors through the driver's file server, so workers need no copy of
    them."""
    if settings.spark_master.startswith("local"):
        return {}
    conf = {"spark.executor.memory": settings.spark_executor_memory,
            "spark.executor.extraJavaOptions": JIT_HUGE_METHODS}
    if settings.spark_cores_max:
        conf["spark.cores.max"] = str(settings.spark_cores_max)
    return conf


def catalog_conf(settings: Settings) -> dict[str, str]:
    """Spark's built-in Hive metastore client, on the shared catalog database (``services.catalog_server``).

    The metastore's tables are created by the first client that finds them missing, and the schema version check
    is off for that reason: the database belongs to the platform and only Spark's own Hive client writes it.

    A Delta table's metastore entry starts with a placeholder column (its schema lives in its log). When a REPLACE
    (dbt's table models) syncs the real columns into the entry, Hive by default refuses that as an incompatible
    column change: an ERROR in the log of every rerun, and the entry keeps the placeholder. The columns are
    Delta's to say, so the check is off."""
    from spark_apps.services.catalog_server import client_jars, jdbc_url

    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.driver.extraClassPath": ":".join(str(jar) for jar in client_jars(settings)),
        "spark.hadoop.javax.jdo.option.ConnectionURL": jdbc_url(settings),
        "spark.hadoop.javax.jdo.option.ConnectionDriverName": "org.apache.derby.client.ClientAutoloadedDriver",
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        "spark.hadoop.hive.metastore.disallow.incompatible.col.type.changes": "false",
    }


def _base_conf(settings: Settings) -> dict[str, str]:
    return {
        "spark.master": settings.spark_master,
        "spark.jars": ",".join(str(jar) for jar in spark_jars(settings)),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        **catalog_conf(settings),
        **object_store_conf(settings),
        **({CHECKPOINT_FILE_MANAGER: OBJECT_STORE_CHECKPOINTS} if isinstance(settings.checkpoint_root, ObjectPath)
           else {}),
        "spark.sql.warehouse.dir": str(settings.warehouse_dir),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(settings.spark_shuffle_partitions),
        "spark.default.parallelism": str(settings.spark_shuffle_partitions),
        "spark.driver.memory": settings.spark_driver_memory,
        "spark.ui.enabled": str(settings.spark_ui_enabled).lower(),
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": " ".join([f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}",
                                                   f"-Dkappa.spark.log={spark_log(settings)}",
                                                   JIT_HUGE_METHODS, *class_archive_options(settings),
                                                   settings.spark_driver_java_options]).strip(),
        "spark.driver.bindAddress": settings.spark_driver_bind_address,
        "spark.driver.host": settings.spark_driver_host,
        # MERGE honours these session settings for idempotent writes; reset them after each commit.
        "spark.databricks.delta.write.txnVersion.autoReset.enabled": "true",
        "spark.databricks.delta.schema.autoMerge.enabled": "false",
        # Delta rebuilds and filters a table's file list in Spark jobs of this many tasks (50 by default), and each
        # task generates its code again: on 2 cores one task per job made a 2,000-record micro-batch over 1M-row
        # tables 14 s instead of 16-20 s (docs/scaling.md).
        "spark.databricks.delta.snapshotPartitions": str(settings.delta_snapshot_partitions),
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": str(settings.spark_shuffle_partitions),
        # MERGE sources here are deterministic reads of Delta tables and cached frames, so they need
        # no materialized copy (which costs a local checkpoint per MERGE).
        "spark.databricks.delta.merge.materializeSource": "none",
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
        # PySpark otherwise records the Python call site of every Column function in the JVM, four extra py4j
        # round trips per call: building one micro-batch's plan made 5,700 calls instead of 1,900. The platform's
        # errors name their table and step themselves.
        "spark.python.sql.dataFrameDebugging.enabled": "false",
    }


# Spark's default checkpoint writer (through Hadoop's FileContext) checks that a file's folder exists before it
# writes the file; an object store has no empty folders to find (an S3-compatible server on a filesystem lists none),
# so a new checkpoint's first offsets file failed with "No such file or directory". This one writes through the
# FileSystem API, which needs no folder, and still writes each file whole (a temporary file, then a rename).
CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
OBJECT_STORE_CHECKPOINTS = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"


def object_store_conf(settings: Settings) -> dict[str, str]:
    """Hadoop's S3A settings for ``s3a://`` paths at ``KAPPA_S3_ENDPOINT``: path-style requests (an S3-compatible
    server has no bucket subdomains), its keys, TLS as its scheme says, how often to retry. None when no endpoint
    is set."""
    endpoint = settings.s3_endpoint
    if not endpoint:
        return {}
    return {f"spark.hadoop.fs.s3a.{key}": value for key, value in {
        "endpoint": endpoint, "endpoint.region": "us-east-1", "path.style.access": "true",
        "connection.ssl.enabled": str(endpoint.startswith("https://")).lower(),
        "access.key": settings.s3_access_key, "secret.key": settings.object_store_access().secret_key(),
        "attempts.maximum": str(settings.s3_retries), "retry.limit": str(settings.s3_retries)}.items()}


def spark_log(settings: Settings) -> Path:
    """Where every Spark driver of the home writes its warnings and errors, instead of the console."""
    return settings.log_dir / "spark.log"


def get_spark(settings: Settings, app_name: str = "kappa"):
    """Create (or return the running) session on the shared catalog, where every table is visible by name.

    Fails in one line when the catalog database does not answer. Whoever reads the ``serving.*`` views (serving
    decisions, dbt) points them first."""
    from pyspark.sql import SparkSession

    from spark_apps.services.catalog_server import require_running

    require_running(settings)
    settings.warehouse_dir.mkdir(parents=True, exist_ok=True)
    settings.log_dir.mkdir(parents=True, exist_ok=True)
    # The JVM resolves its own address before reading any setting; without this it may pick a non-loopback
    # one (and says so in a warning on every start).
    os.environ.setdefault("SPARK_LOCAL_IP", settings.spark_driver_bind_address)
    # Python workers run the interpreter (and packages) of the virtualenv that started the driver, not whatever
    # python3 is first on PATH: a driver started from Python reads only this variable (spark.pyspark.python is
    # spark-submit's). A PYSPARK_PYTHON already set (a remote cluster's interpreter) wins.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    for key, value in session_conf(settings).items():
        builder = builder.config(key, value)
    from pyspark import SparkContext
    from pyspark.errors import PySparkRuntimeError

    try:
        with _jvm_output_to(spark_log(settings)) if SparkContext._active_spark_context is None else nullcontext():
            spark = builder.getOrCreate()
    except PySparkRuntimeError as exc:
        raise PlatformError(f"Spark did not start ({str(exc).splitlines()[0]}); the JVM says why in "
                            f"{spark_log(settings)}") from None
    spark.sparkContext.setLogLevel("WARN")
    _reach_buckets(spark, settings)
    return spark


def _reach_buckets(spark, settings: Settings) -> None:
    """Give the running session S3A settings for the buckets these settings name. A session is started with one
    settings' endpoint for every bucket, and a process that starts it once (a test session, the lab) serves
    settings of other homes too: per-bucket settings (``fs.s3a.bucket.<b>.*``) reach each home's buckets."""
    buckets = settings.object_store_buckets()
    if not buckets:
        return
    if isinstance(settings.checkpoint_root, ObjectPath):
        spark.conf.set(CHECKPOINT_FILE_MANAGER, OBJECT_STORE_CHECKPOINTS)
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for bucket in buckets:
        for key, value in object_store_conf(settings).items():
            hadoop.set(key.replace("spark.hadoop.fs.s3a.", f"fs.s3a.bucket.{bucket}."), value)


# One process-wide descriptor is swapped: two sessions starting at once in one process must not interleave.
_OUTPUT_SWAP = threading.Lock()


@contextmanager
def _jvm_output_to(log: Path) -> Iterator[None]:
    """Start the JVM with its standard error on ``log``: it inherits this process's descriptor 2, and what it
    prints itself, outside log4j, would reach the console (the JVM's "Using incubator modules" warning on every
    start, an uncaught exception's stack). The command's own standard error is back when the JVM has started."""
    with _OUTPUT_SWAP:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            with open(log, "ab") as output:
                os.dup2(output.fileno(), 2)
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
