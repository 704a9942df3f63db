"""A class-data-sharing archive of the Spark driver's classes, so every Spark process starts faster.

Each `kappa` command, Airflow task, dbt run and stream starts its own driver JVM, and loading and verifying Spark's,
Hive's and Delta's classes is a large part of that start (measured: a session ready in 6-7 s instead of 10-12 s,
about a quarter off the time to a first Delta query). JDK 17 can map classes it dumped from an earlier run
(``-XX:ArchiveClassesAtExit``) instead of loading them again (``-XX:SharedArchiveFile``). `make jars` builds the
archive once per installation by running a small Delta workload on a throwaway catalog.

The archive only speeds up: ``io.spark_session`` maps it when it exists, and a JVM whose class path or JDK does not
match it starts as before and says nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import PROJECT_ROOT, Settings
from spark_apps.io.spark_session import QUIET_CLASS_ARCHIVE, get_spark

BUILD_TIMEOUT_S = 600


def build(settings: Settings) -> Path:
    """Dump the archive from a child process running the workload below, then move it into place whole."""
    from spark_apps.services.catalog_server import CatalogServer
    from spark_apps.services.processes import free_port

    target = settings.spark_class_archive
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.partial")
    partial.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="kappa-class-archive-") as home:
        dump = f"-XX:ArchiveClassesAtExit={partial} {QUIET_CLASS_ARCHIVE}"
        # The dumping JVM must not map the archive it replaces: a dynamic archive cannot be dumped on top of one.
        # Its tables stay in the scratch home, whatever warehouse (an object store's) the caller's settings name.
        scratch = settings.with_overrides(home=Path(home), catalog_port=free_port(), spark_driver_java_options=dump,
                                          spark_class_archive=Path(home) / "none.jsa",
                                          warehouse_dir=Path(home) / "warehouse",
                                          checkpoint_root=Path(home) / "checkpoints")
        catalog = CatalogServer(scratch, stop_with_parent=True)
        catalog.start()
        try:
            done = subprocess.run([sys.executable, "-m", __name__], env={**os.environ, **scratch.as_env()},
                                  cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise PlatformError(f"the Spark class archive was not built within {BUILD_TIMEOUT_S}s") from None
        finally:
            catalog.stop()
    if done.returncode != 0 or not partial.is_file():
        raise PlatformError(f"the Spark class archive was not built: {(done.stderr or done.stdout).strip()[-500:]}")
    os.replace(partial, target)
    return target


def _workload(settings: Settings) -> None:
    """What the platform's drivers do, small: Delta tables written, merged, read back in time and streamed, and
    the catalog's databases and views. Each class it loads goes into the archive."""
    from delta.tables import DeltaTable

    spark = get_spark(settings, app_name="kappa-class-archive")
    path = str(settings.warehouse_dir / "archive.db" / "rows")
    rows = spark.range(100).selectExpr("id", "id % 7 AS key", "CAST(id AS STRING) AS label")
    rows.write.format("delta").save(path)
    DeltaTable.forPath(spark, path).alias("t").merge(rows.where("id < 50").alias("s"), "t.id = s.id") \
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    spark.read.format("delta").option("versionAsOf", 0).load(path).groupBy("key").count().collect()
    DeltaTable.forPath(spark, path).history(5).collect()
    copy = str(settings.warehouse_dir / "archive.db" / "copy")
    query = (spark.readStream.format("delta").load(path).writeStream.trigger(availableNow=True)
             .option("checkpointLocation", str(settings.checkpoint_root / "archive"))
             .foreachBatch(lambda batch, _: batch.write.format("delta").mode("append").save(copy)).start())
    query.awaitTermination()
    spark.sql("CREATE DATABASE IF NOT EXISTS archive")
    spark.sql(f"CREATE OR REPLACE VIEW archive.rows AS SELECT * FROM delta.`{path}`")
    spark.sql("SELECT key, max(label) FROM archive.rows GROUP BY key").collect()
    spark.sql("SHOW TABLES IN archive").collect()
    spark.stop()


if __name__ == "__main__":
    _workload(Settings.from_env())
