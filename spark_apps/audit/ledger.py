"""``audit.reconciliation_ledger``: one row per table per reconciliation run, appended, never rewritten.

The table is created with ``delta.appendOnly=true``, so Delta itself refuses an UPDATE, DELETE or
MERGE on it: the evidence that gates serving cannot be edited after the fact.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass

from spark_apps.core.settings import Settings
from spark_apps.io.catalog import ensure_table, read_if_present, table_path
from spark_apps.io.catalog_locks import table_write

LEDGER_TABLE = "audit.reconciliation_ledger"
LEDGER_SCHEMA = (
    "run_id string, pipeline string, table string, started_at timestamp, finished_at timestamp, "
    "stream_table string, stream_version bigint, stream_app_id string, stream_batch_id bigint, topic string, "
    "start_offsets map<int,bigint>, end_offsets map<int,bigint>, snapshot_table string, snapshot_version bigint, "
    "stream_rows bigint, batch_rows bigint, matched bigint, missing_in_stream bigint, extra_in_stream bigint, "
    "value_mismatch bigint, buckets bigint, differing_buckets bigint, compare_seconds double, "
    "stream_equals_batch boolean, quality_ok boolean, success boolean, gx_result string, detail string, "
    "code_version string, as_of timestamp, kind string, builds_on string, stream_code_version string")
FULL, INCREMENTAL = "full", "incremental"


@dataclass(frozen=True)
class LedgerRow:
    run_id: str
    pipeline: str
    table: str
    started_at: dt.datetime
    finished_at: dt.datetime
    stream_table: str
    stream_version: int | None
    stream_app_id: str
    stream_batch_id: int
    topic: str
    start_offsets: dict[int, int]
    end_offsets: dict[int, int]
    snapshot_table: str
    snapshot_version: int | None
    stream_rows: int
    batch_rows: int
    matched: int
    missing_in_stream: int
    extra_in_stream: int
    value_mismatch: int
    buckets: int
    differing_buckets: int
    compare_seconds: float
    stream_equals_batch: bool
    quality_ok: bool
    success: bool
    gx_result: str
    detail: str
    code_version: str
    as_of: dt.datetime  # the moment the run stands for: its data interval's end when scheduled, else ``started_at``
    kind: str = FULL  # full: the batch side recomputed the whole log; incremental: extended a verified run's snapshot
    builds_on: str = ""  # the verified run an incremental run extended
    stream_code_version: str = ""  # what the stream ran for the audited batch ("" when its commit did not say)


def append(spark, settings: Settings, rows: list[LedgerRow]) -> None:
    frame = spark.createDataFrame([asdict(r) for r in rows], LEDGER_SCHEMA)
    ensure_table(spark, settings, LEDGER_TABLE, frame.schema, properties={"delta.appendOnly": "true"})
    # A ledger written before a column was added gets it here; its older rows read it as null.
    path = table_path(settings, LEDGER_TABLE)
    with table_write(spark, settings, path, "the ledger's rows of an audit"):
        frame.write.format("delta").mode("append").option("mergeSchema", "true").save(str(path))


def run_rows(spark, settings: Settings, run_id: str) -> list:
    """The rows a run appended (all in one commit, so a run is either fully recorded or absent)."""
    rows = read_if_present(spark, settings, LEDGER_TABLE)
    return [] if rows is None else rows.where(f"run_id = '{run_id}'").orderBy("table").collect()


def run_summary(rows: list) -> dict:
    """A run's outcome as JSON-ready data, for Airflow tasks and scripts."""
    first = rows[0]
    return {
        "run_id": first["run_id"], "pipeline": first["pipeline"], "success": all(r["success"] for r in rows),
        "started_at": first["started_at"].isoformat(), "stream_app_id": first["stream_app_id"],
        "stream_batch_id": first["stream_batch_id"], "topic": first["topic"],
        "end_offsets": {str(p): o for p, o in sorted(first["end_offsets"].items())},
        "code_version": first["code_version"], "kind": first.asDict().get("kind") or FULL,
        "builds_on": first.asDict().get("builds_on") or "",
        "stream_code_version": first.asDict().get("stream_code_version") or "",
        "tables": [{"table": r["table"], "success": r["success"], "stream_equals_batch": r["stream_equals_batch"],
                    "quality_ok": r["quality_ok"], "stream_table": r["stream_table"],
                    "stream_version": r["stream_version"], "snapshot_table": r["snapshot_table"],
                    "snapshot_version": r["snapshot_version"], "detail": r["detail"]} for r in rows],
    }


def latest_runs(spark, settings: Settings, pipeline: str) -> dict[str, tuple[str, bool]]:
    """Per stream table (``gold.x`` or a replay generation's ``gold.x__g2``), the newest run that reconciled it
    and whether that whole run succeeded (a broken count contract or a differing upstream table fails every table
    of the run, as serving counts it)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ledger = read_if_present(spark, settings, LEDGER_TABLE)
    if ledger is None:
        return {}
    rows = ledger.where(F.col("pipeline") == pipeline)
    by_run = Window.partitionBy("run_id")
    newest_first = Window.partitionBy("stream_table").orderBy(F.col("started_at").desc(), F.col("run_id").desc())
    latest = (rows.withColumn("run_success", F.min(F.col("success").cast("int")).over(by_run) == 1)
              .withColumn("rank", F.row_number().over(newest_first)).where("rank = 1")
              .select("stream_table", "run_id", "run_success").collect())
    return {r["stream_table"]: (r["run_id"], bool(r["run_success"])) for r in latest}
