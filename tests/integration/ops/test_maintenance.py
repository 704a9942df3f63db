"""Daily maintenance on a warehouse of its own: compaction, VACUUM within the retention, both checks, the CLI.

The tables are small direct Delta writes under the marketplace pipeline's names (a micro-batch of the real
stream costs 20-40 s); the commit log gets the rows the stream would append.
"""

from __future__ import annotations

import uuid

import pytest

from spark_apps.alerts.dispatch import ALERTS_TABLE
from spark_apps.audit.ledger import LEDGER_TABLE
from spark_apps.cli import main
from spark_apps.io.catalog import ensure_table, table_path
from spark_apps.io.topics import admin_client, ensure_topic, partition_offsets
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.ops.maintenance import CHECKPOINT, LOG_RETENTION, check_checkpoint, check_log_retention, maintain
from spark_apps.stream.job import APP_ID_FILE, StreamJob

pytestmark = pytest.mark.integration
TABLES = PIPELINE.tables()
APP_ID = "kappa-marketplace-maintenance-test"
COMMITS_SCHEMA = ("pipeline string, app_id string, batch_id bigint, topic string, start_offsets map<int,bigint>, "
                  "end_offsets map<int,bigint>, records bigint, dead_letters bigint, duration_ms bigint")


@pytest.fixture(scope="module")
def topic(kafka_broker, settings):
    """A topic holding three records per partition."""
    from spark_apps.io.producer import make_producer

    name = f"test.maintenance.{uuid.uuid4().hex[:8]}"
    ensure_topic(settings, name, partitions=2)
    producer = make_producer(settings)
    for partition in (0, 1):
        for n in range(3):
            producer.send(name, key=b"k", value=f'{{"n": {n}}}'.encode(), partition=partition)
    producer.flush()
    producer.close()
    yield name
    with admin_client(settings) as admin:
        admin.delete_topics([name])


def home(settings, tmp_path_factory, name: str):
    return settings.with_overrides(home=tmp_path_factory.mktemp(name))


def record_batch(spark, settings, topic: str, batch_id: int, end: dict[int, int]) -> None:
    """The row the stream appends to its commit log after a micro-batch that read ``[0, end)``."""
    row = (PIPELINE.name, APP_ID, batch_id, topic, {p: 0 for p in end}, end, sum(end.values()), 0, 10)
    frame = spark.createDataFrame([row], COMMITS_SCHEMA)
    frame.write.format("delta").mode("append").save(str(table_path(settings, TABLES.commits)))


def commit_checkpoint(spark, settings, batch_id: int) -> None:
    """A checkpoint of this app that committed ``batch_id`` (the files the check reads)."""
    checkpoint = StreamJob(spark, settings, PIPELINE).checkpoint
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    (checkpoint / APP_ID_FILE).write_text(APP_ID + "\n")
    (checkpoint / "commits" / str(batch_id)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')


def alerts(spark, settings) -> dict[str, str]:
    rows = spark.read.format("delta").load(str(table_path(settings, ALERTS_TABLE))).collect()
    return {r.dedup_key: r.runbook for r in rows}


@pytest.fixture(scope="module")
def maintained(spark, settings, tmp_path_factory, topic):
    """Small appends to bronze and the append-only ledger, a consistent checkpoint, then ``maintain``."""
    local = home(settings, tmp_path_factory, "maintenance")
    bronze = str(table_path(local, TABLES.bronze))
    for n in range(4):
        spark.createDataFrame([(n, f"record {n}")], "offset bigint, value string").write.format("delta") \
            .mode("append").save(bronze)
    ledger = spark.createDataFrame([("run-0", True)], "run_id string, success boolean")
    ensure_table(spark, local, LEDGER_TABLE, ledger.schema, properties={"delta.appendOnly": "true"})
    for n in range(2):
        spark.createDataFrame([(f"run-{n}", True)], ledger.schema).write.format("delta").mode("append") \
            .save(str(table_path(local, LEDGER_TABLE)))
    end = {p: latest for p, (_, latest) in partition_offsets(local, topic).items()}
    record_batch(spark, local, topic, 0, end)
    commit_checkpoint(spark, local, 0)
    return local, maintain(spark, local, PIPELINE)


def test_maintenance_compacts_small_files_of_every_table_it_finds(maintained):
    _, report = maintained
    tables = {t.table: t for t in report.tables}
    assert list(tables) == [TABLES.bronze, TABLES.commits, LEDGER_TABLE], "only existing tables, in order"
    assert tables[TABLES.bronze].files_before >= 4 and tables[TABLES.bronze].files_after == 1
    assert tables[LEDGER_TABLE].files_before >= 2 and tables[LEDGER_TABLE].files_after == 1, \
        "the append-only ledger is compacted too"
    assert not any(t.error for t in report.tables) and report.ok


def test_vacuum_keeps_every_version_within_the_retention_readable(spark, maintained):
    from delta.tables import DeltaTable

    local, report = maintained
    assert all(t.vacuumed == 0 for t in report.tables), "every replaced file is younger than the retention"
    bronze = str(table_path(local, TABLES.bronze))
    assert spark.read.format("delta").option("versionAsOf", 0).load(bronze).count() == 1
    assert spark.read.format("delta").load(bronze).count() == 4
    vacuum = (DeltaTable.forPath(spark, bronze).history().where("operation = 'VACUUM START'")
              .first().operationParameters)
    assert vacuum["retentionCheckEnabled"] == "true", "Delta's own guard against a too short retention stays on"
    with pytest.raises(Exception, match="DELTA_UNSUPPORTED_DELETE|appendOnly|append-only"):
        spark.sql(f"DELETE FROM delta.`{table_path(local, LEDGER_TABLE)}` WHERE run_id = 'run-0'")


def test_both_checks_pass_when_checkpoint_commit_log_and_log_agree(maintained, topic):
    _, report = maintained
    checks = {c.name: c for c in report.checks}
    assert checks[CHECKPOINT].ok, checks[CHECKPOINT].detail
    assert checks[LOG_RETENTION].ok and checks[LOG_RETENTION].detail.startswith(f"{topic} still holds p0=[0,3)")


def test_checks_fail_and_alert_when_the_checkpoint_is_missing_and_the_log_lacks_recorded_offsets(
        spark, settings, tmp_path_factory, topic):
    local = home(settings, tmp_path_factory, "maintenance-broken")
    record_batch(spark, local, topic, 4, {0: 3, 1: 1000})  # tables that outlive their checkpoint and the log

    checkpoint = check_checkpoint(spark, local, PIPELINE)
    retention = check_log_retention(spark, local, PIPELINE)

    assert not checkpoint.ok and "the checkpoint is missing but the tables record batches up to 4" in checkpoint.detail
    assert not retention.ok and "partition 1 ends at 3, before 1000" in retention.detail
    raised = alerts(spark, local)
    assert raised[f"maintenance:{PIPELINE.name}:checkpoint"] == "docs/runbook.md#maintenance-failed"
    assert raised[f"retention:{topic}"] == "docs/runbook.md#log-retention"


def test_an_unknown_pipeline_is_one_line(capsys):
    assert main(["maintain", "--pipeline", "nope"]) == 1
    assert capsys.readouterr().err.strip() == ("kappa maintain: error: no pipeline named 'nope'; registered: "
                                               "marketplace (or give module:attribute)")
