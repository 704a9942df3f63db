"""Daily maintenance on a warehouse of its own: compaction, VACUUM within the retention, both checks, the CLI.

The tables are small direct Delta writes under the marketplace pipeline's names (a micro-batch of the real
stream costs seconds): the stream's store gets a few record rows and the commit row the stream would append.
"""

from __future__ import annotations

import uuid

import pytest

from spark_apps.alerts.dispatch import ALERTS_TABLE
from spark_apps.audit.ledger import LEDGER_TABLE
from spark_apps.cli import main
from spark_apps.io.catalog import ensure_table, table_path
from spark_apps.io.stream_store import ensure_store
from spark_apps.io.topics import admin_client, ensure_topic, partition_offsets
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.ops.maintenance import CHECKPOINT, LOG_RETENTION, check_checkpoint, check_log_retention, maintain
from spark_apps.stream.job import APP_ID_FILE, StreamJob
from spark_apps.target.resolution import target_of
from spark_apps.transforms.store import commit_row

pytestmark = pytest.mark.integration
TABLES = PIPELINE.tables()
APP_ID = "kappa-marketplace-maintenance-test"


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


def append_to_store(spark, settings, rows: list[dict]) -> None:
    """Rows of the store (its columns by name, the others null), in one append, the store created first."""
    ensure_store(spark, settings, target_of(settings, PIPELINE))
    path = str(table_path(settings, TABLES.store))
    schema = spark.read.format("delta").load(path).schema
    frame = spark.createDataFrame([tuple(row.get(f.name) for f in schema.fields) for row in rows], schema)
    frame.write.format("delta").mode("append").save(path)


def record_batch(spark, settings, topic: str, batch_id: int, end: dict[int, int]) -> None:
    """The commit row the stream appends to its store after a micro-batch that read ``[0, end)``."""
    values = {"pipeline": PIPELINE.name, "app_id": APP_ID, "topic": topic, "start_offsets": {p: 0 for p in end},
              "end_offsets": end, "records": sum(end.values()), "dead_letters": 0, "duration_ms": 10}
    append_to_store(spark, settings, [commit_row(values, batch_id)])


def commit_checkpoint(spark, settings, batch_id: int) -> None:
    """A checkpoint of this app that committed ``batch_id`` (the files the check reads)."""
    checkpoint = StreamJob(spark, settings, target_of(settings, PIPELINE)).checkpoint
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    (checkpoint / APP_ID_FILE).write_text(APP_ID + "\n")
    (checkpoint / "commits" / str(batch_id)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')


def alerts(spark, settings) -> dict[str, str]:
    rows = spark.read.format("delta").load(str(table_path(settings, ALERTS_TABLE))).collect()
    return {r.dedup_key: r.runbook for r in rows}


@pytest.fixture(scope="module")
def maintained(spark, settings, tmp_path_factory, topic):
    """Small appends of records to the store and to the append-only ledger, a consistent checkpoint, then
    ``maintain``."""
    local = home(settings, tmp_path_factory, "maintenance")
    for n in range(4):
        append_to_store(spark, local, [{"_kind": "record", "_batch_id": 0, "topic": topic, "partition": 0,
                                        "offset": n, "value": f"record {n}".encode()}])
    ledger = spark.createDataFrame([("run-0", True)], "run_id string, success boolean")
    ensure_table(spark, local, LEDGER_TABLE, ledger.schema, properties={"delta.appendOnly": "true"})
    for n in range(2):
        spark.createDataFrame([(f"run-{n}", True)], ledger.schema).write.format("delta").mode("append") \
            .save(str(table_path(local, LEDGER_TABLE)))
    end = {p: latest for p, (_, latest) in partition_offsets(local, topic).items()}
    record_batch(spark, local, topic, 0, end)
    commit_checkpoint(spark, local, 0)
    return local, maintain(spark, local, target_of(local, PIPELINE))


def test_maintenance_compacts_small_files_of_every_table_it_finds(maintained):
    _, report = maintained
    tables = {t.table: t for t in report.tables}
    assert list(tables) == [TABLES.store, LEDGER_TABLE], "only existing tables, in order"
    assert tables[TABLES.store].files_before >= 5 and tables[TABLES.store].files_after == 2, \
        "one file per kind of row: the records, the commit row"
    assert tables[LEDGER_TABLE].files_before >= 2 and tables[LEDGER_TABLE].files_after == 1, \
        "the append-only ledger is compacted too"
    assert not any(t.error for t in report.tables) and report.ok


def test_vacuum_keeps_every_version_within_the_retention_readable(spark, maintained):
    from delta.tables import DeltaTable

    local, report = maintained
    assert all(t.vacuumed == 0 for t in report.tables), "every replaced file is younger than the retention"
    store = str(table_path(local, TABLES.store))
    assert spark.read.format("delta").option("versionAsOf", 1).load(store).count() == 1
    assert spark.read.format("delta").load(store).count() == 5
    vacuum = (DeltaTable.forPath(spark, store).history().where("operation = 'VACUUM START'")
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
        spark, settings, tmp_path_factory, topic, webhook):
    local = home(settings, tmp_path_factory, "maintenance-broken").with_overrides(
        alert_webhook_url=f"{webhook.url}/maintenance")
    record_batch(spark, local, topic, 4, {0: 3, 1: 1000})  # tables that outlive their checkpoint and the log

    checkpoint = check_checkpoint(spark, local, target_of(local, PIPELINE))
    retention = check_log_retention(spark, local, target_of(local, PIPELINE))

    assert not checkpoint.ok and "the checkpoint is missing but the tables record batches up to 4" in checkpoint.detail
    assert not retention.ok and "partition 1 ends at 3, before 1000" in retention.detail
    raised = alerts(spark, local)
    assert raised[f"maintenance:{PIPELINE.name}:checkpoint"] == "docs/runbook.md#maintenance-failed"
    assert raised[f"retention:{topic}"] == "docs/runbook.md#log-retention"

    # The checkpoint that belongs to the tables is restored, and the stream records a batch the log holds.
    commit_checkpoint(spark, local, 4)
    record_batch(spark, local, topic, 5, {0: 3, 1: 3})
    target = target_of(local, PIPELINE)
    assert check_checkpoint(spark, local, target).ok and check_log_retention(spark, local, target).ok
    assert [(b["dedup_key"], b["action"]) for b in webhook.bodies("/maintenance")] == [
        (f"maintenance:{PIPELINE.name}:checkpoint", "trigger"), (f"retention:{topic}", "trigger"),
        (f"maintenance:{PIPELINE.name}:checkpoint", "resolve"), (f"retention:{topic}", "resolve")]


def test_an_unknown_pipeline_is_one_line(capsys):
    assert main(["maintain", "--pipeline", "nope"]) == 1
    assert capsys.readouterr().err.strip() == ("kappa maintain: error: no pipeline named 'nope'; registered: "
                                               "marketplace (or give module:attribute)")
