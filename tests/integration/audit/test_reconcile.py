"""The Lambda auditor against the real broker, Spark and Great Expectations: it proves, and it can fail."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest

from spark_apps.audit.auditor import audit, compare_with_snapshot
from spark_apps.audit.diff import EXTRA, KINDS, MISMATCH, MISSING, TableDiff
from spark_apps.audit.expectations import DOCS_INDEX_RESULTS
from spark_apps.audit.ledger import LEDGER_TABLE
from spark_apps.audit.recompute import RetentionError, align, check_retention, recompute, stream_tables
from spark_apps.cli import main
from spark_apps.core.errors import PlatformError
from spark_apps.core.waiting import poll
from spark_apps.io.catalog import table_path
from spark_apps.io.lineage import StreamPosition, batch_end_offsets, position_at
from spark_apps.io.topics import partition_offsets
from spark_apps.marketplace.pipeline import PIPELINE, WINDOW_S
from spark_apps.serving import replay
from spark_apps.target import generations
from spark_apps.target.resolution import target_of
from tests.support.streams import read_stream_table

pytestmark = pytest.mark.integration


def ledger_rows(spark, settings, run_id: str) -> dict:
    rows = spark.read.format("delta").load(str(table_path(settings, LEDGER_TABLE))).where(f"run_id = '{run_id}'")
    return {r.table: r for r in rows.collect()}


def test_every_stream_table_reconciles_exactly_after_crashes_and_restarts(spark, restarted_stream, audited):
    assert len(restarted_stream.failures) == 5, "the audited stream was killed at every stage first"
    assert audited.success
    labels = {t.label for t in stream_tables(target_of(restarted_stream.job.settings, PIPELINE))}
    assert {v.table.label for v in audited.verdicts} == labels
    for verdict in audited.verdicts:
        assert verdict.diff.exact and verdict.gx.success, verdict.table.label
        assert verdict.diff.matched == verdict.diff.batch_rows == verdict.diff.stream_rows > 0
        assert verdict.diff.differing_buckets == []
    manifest = restarted_stream.manifest
    by_label = {v.table.label: v.diff for v in audited.verdicts}
    assert by_label["bronze.events_raw"].stream_rows == manifest.total_records
    assert all(check.ok for check in audited.contract) and len(audited.contract) == 5
    dead = next(c for c in audited.contract if c.name == "log records = batch candidates + batch dead letters")
    assert dead.left == manifest.total_records


def test_the_ledger_gets_one_success_row_per_table_and_refuses_edits(spark, restarted_stream, audited):
    settings = restarted_stream.job.settings
    rows = ledger_rows(spark, settings, audited.run_id)
    assert set(rows) == {t.label for t in stream_tables(target_of(settings, PIPELINE))} | {"contract.record_counts"}
    assert all(r.success and r.stream_equals_batch for r in rows.values())
    gold = rows["gold.merchant_revenue"]
    assert gold.end_offsets == audited.position.end_offsets and gold.code_version
    assert gold.gx_result.startswith("file://") and gold.snapshot_table == "batch.merchant_revenue"
    with pytest.raises(Exception, match="(?i)append"):
        spark.sql(f"DELETE FROM delta.`{table_path(settings, LEDGER_TABLE)}` WHERE true")


def test_the_report_and_data_docs_show_every_verdict(audited):
    page = audited.report_path.read_text()
    assert "EXACT MATCH" in page and "MISMATCH" not in page
    for verdict in audited.verdicts:
        assert verdict.table.label in page
    assert audited.docs_url.startswith("file://")
    index = open(audited.docs_url.removeprefix("file://")).read()
    assert all(f"marketplace.{verdict.table.label}" in index for verdict in audited.verdicts)


def test_great_expectations_keeps_its_usage_analytics_off_and_its_docs_index_bounded(restarted_stream, audited):
    config = (restarted_stream.job.settings.gx_dir / "gx" / "great_expectations.yml").read_text()
    assert "analytics_enabled: false" in config
    assert f"validation_results_limit: {DOCS_INDEX_RESULTS}" in config, "every audit would read every stored result"


def test_the_batch_reads_only_the_offsets_the_stream_version_reflects(spark, restarted_stream, audited):
    settings = restarted_stream.job.settings
    position = audited.position
    latest = {p: end for p, (_, end) in partition_offsets(settings, position.topic).items()}
    assert sum(latest.values()) > sum(position.end_offsets.values()), "records were produced after V"
    assert audited.snapshot.records == sum(end - position.start_offsets.get(p, 0)
                                           for p, end in position.end_offsets.items())
    snapshot_path = table_path(settings, "batch.events_raw")
    tag = json.loads(spark.sql(f"DESCRIBE HISTORY delta.`{snapshot_path}` LIMIT 1").first().userMetadata)
    assert tag["run_id"] == audited.run_id and tag["code_version"]
    assert {int(p): o for p, o in tag["end_offsets"].items()} == position.end_offsets


def test_a_table_version_picks_the_batch_it_reflects_and_every_table_is_aligned_to_it(spark, restarted_stream):
    job = restarted_stream.job
    first = next(r.version for r in spark.sql(f"DESCRIBE HISTORY delta.`{job.store}`").collect()
                 if r.userMetadata and '"batch_id":0,' in r.userMetadata)
    alignment = align(spark, job.settings, target_of(job.settings, PIPELINE), table=job.tables.bronze, version=first)
    assert alignment.position.batch_id == 0
    assert alignment.position.end_offsets == batch_end_offsets(job.checkpoint, 0, job.topic)
    assert set(alignment.versions) == set(PIPELINE.stream_table_names())
    assert set(alignment.versions.values()) == {first}, "every stream table is a view of the store at one version"
    with pytest.raises(PlatformError, match="no Delta table gold.nothing at "):
        align(spark, job.settings, target_of(job.settings, PIPELINE), table="gold.nothing")
    with pytest.raises(PlatformError, match="has no stream table silver.nope; its tables: bronze.events_raw, "):
        audit(spark, job.settings, target_of(job.settings, PIPELINE), only=["silver.nope"])


def test_alignment_of_an_older_batch_skips_maintenance_commits_made_after_later_batches(spark, restarted_stream):
    job = restarted_stream.job
    spark.sql(f"OPTIMIZE delta.`{job.store}`")  # a maintenance commit, newer than every batch, without stream metadata
    history = spark.sql(f"DESCRIBE HISTORY delta.`{job.store}`").collect()
    assert history[0].operation == "OPTIMIZE"
    first_batch_at = min(r.timestamp for r in history if r.userMetadata and '"batch_id":0,' in r.userMetadata)
    alignment = align(spark, job.settings, target_of(job.settings, PIPELINE),
                      as_of=first_batch_at.replace(tzinfo=dt.UTC))  # session: UTC
    assert alignment.position.batch_id == 0
    for name in (job.tables.bronze, job.tables.events, job.tables.gold("order_status")):
        assert position_at(table_path(job.settings, job.tables.store), alignment.versions[name]).batch_id == 0, name


def test_recomputing_twice_gives_identical_snapshots(spark, restarted_stream, audited):
    settings = restarted_stream.job.settings
    target = target_of(settings, PIPELINE)
    again = recompute(spark, settings, target, align(spark, settings, target), f"again-{uuid.uuid4().hex[:6]}")
    for table in stream_tables(target):
        path = str(table_path(settings, table.snapshot))
        first, second = (sorted(map(tuple, spark.read.format("delta").option("versionAsOf", v).load(path).collect()))
                         for v in (audited.snapshot.versions[table.snapshot], again.versions[table.snapshot]))
        assert again.versions[table.snapshot] > audited.snapshot.versions[table.snapshot]
        assert first == second, table.snapshot


# ---- the check can fail ---------------------------------------------------------------------------
# Each corruption hits its own table, so one reconcile run shows each one failed and classified.


def delete_a_gold_row(spark, job):
    """Lose the rows of a customer with one session: their session is missing from the view."""
    single = read_stream_table(spark, job.settings, job.tables.gold("customer_sessions")).groupBy("customer_id") \
        .count().where("count = 1").orderBy("customer_id").first()
    spark.sql(f"DELETE FROM delta.`{job.store}` WHERE _kind = 'gold.customer_sessions' "
              f"AND customer_sessions__customer_id = '{single.customer_id}'")
    return "gold.customer_sessions", {MISSING: 1}


def change_one_value(spark, job):
    order = read_stream_table(spark, job.settings, job.tables.gold("order_status")).where("paid_cents > 0") \
        .orderBy("order_id").first().order_id
    spark.sql(f"UPDATE delta.`{job.store}` SET order_status__paid_cents = order_status__paid_cents + 1 "
              f"WHERE _kind = 'gold.order_status' AND order_status__order_id = '{order}'")
    return "gold.order_status", {MISMATCH: 1}


def duplicate_a_record(spark, job):
    """Ingest one record twice: bronze holds an extra row, and the record count no longer matches the log."""
    spark.read.format("delta").load(job.store).where("_kind = 'record'").orderBy("partition", "offset").limit(1) \
        .write.format("delta").mode("append").save(job.store)
    return "bronze.events_raw", {EXTRA: 1}


def drop_a_late_event_into_gold(spark, job):
    """Count a late payment in its window, as a stream that ignored the lateness rule would: one more partial
    row of the window."""
    late = read_stream_table(spark, job.settings, job.tables.late_events) \
        .where("event_type = 'payment_captured'").orderBy("event_id").first()
    gold = read_stream_table(spark, job.settings, job.tables.gold("merchant_revenue"))
    width = WINDOW_S
    window = f"timestamp_seconds(floor(unix_seconds(timestamp'{late.event_time}') / {width}) * {width})"
    where = f"merchant_id = '{late.merchant_id}' AND currency = '{late.currency}' AND window_start = {window}"
    kind = MISMATCH if gold.where(where).count() else EXTRA
    spark.sql(f"INSERT INTO delta.`{job.store}` (_kind, _batch_id, _reset, _empty, merchant_revenue__merchant_id, "
              "merchant_revenue__window_start, merchant_revenue__currency, merchant_revenue__orders, "
              "merchant_revenue__gross_cents, merchant_revenue__refunds_cents, merchant_revenue__customers) "
              f"SELECT 'gold.merchant_revenue', 0, false, false, '{late.merchant_id}', {window}, '{late.currency}', "
              f"0, {late.amount_cents}, 0, array('{late.customer_id}')")
    return "gold.merchant_revenue", {kind: 1}


CORRUPTIONS = (delete_a_gold_row, change_one_value, duplicate_a_record, drop_a_late_event_into_gold)


def test_each_kind_of_corruption_fails_reconciliation_is_classified_and_exits_non_zero(
        spark, restarted_stream, audited, monkeypatch, capsys):
    job = restarted_stream.job
    before = spark.sql(f"DESCRIBE HISTORY delta.`{job.store}` LIMIT 1").first().version
    for name, value in job.settings.as_env().items():
        monkeypatch.setenv(name, value)
    expected: dict[str, dict[str, int]] = {}
    try:
        for corrupt in CORRUPTIONS:
            label, kinds = corrupt(spark, job)
            expected.setdefault(label, {}).update(kinds)
        exit_code = main(["reconcile", "--only", ",".join(expected)])
    finally:
        spark.sql(f"RESTORE TABLE delta.`{job.store}` TO VERSION AS OF {before}")
    out, err = capsys.readouterr()
    assert exit_code == 1 and "stream and batch differ" in err
    run_id = out.split()[1].rstrip(":")
    rows = ledger_rows(spark, job.settings, run_id)
    for label, kinds in expected.items():
        counts = (kinds.get(MISSING, 0), kinds.get(EXTRA, 0), kinds.get(MISMATCH, 0))
        row = rows[label]
        assert not row.success and not row.stream_equals_batch, label
        assert (row.missing_in_stream, row.extra_in_stream, row.value_mismatch) == counts, label
        assert f"missing {counts[0]}, extra {counts[1]}, mismatched {counts[2]};" in \
            next(line for line in out.splitlines() if line.startswith(label) and "MISMATCH" in line)
    assert rows["contract.record_counts"].detail.startswith("log records in [start, O) = stream bronze rows")
    assert not rows["contract.record_counts"].success
    report = (job.settings.reports_dir / "reconciliation" / "marketplace-latest.html").read_text()
    assert run_id in report and all(f"<h4>{kind}:" in report for kind in KINDS), "samples of each kind"

    # The changed order, traced from the verdict to the log: both rows, its records, the batch, the outside write.
    order = read_stream_table(spark, job.settings, job.tables.gold("order_status")).where("paid_cents > 0") \
        .orderBy("order_id").first().order_id
    assert f"kappa explain --pipeline marketplace --table gold.order_status --key order_id={order}" in report
    assert main(["explain", "--table", "gold.order_status", "--key", f"order_id={order}"]) == 0
    explained = capsys.readouterr().out.splitlines()
    assert explained[0].startswith(f"gold.order_status order_id={order}: reconciliation {run_id} compared")
    paid = next(line for line in explained if line.startswith("paid_cents"))
    assert paid.endswith("<- differs") and int(paid.split()[1]) == int(paid.split()[2]) + 1, paid
    bronze = read_stream_table(spark, job.settings, job.tables.bronze, version=before)
    records = {(r.partition, r.offset) for r in bronze.where(f"order_id = '{order}' AND dead_letter_reason IS NULL")
               .collect()}
    listed = {(int(line.split()[2]), int(line.split()[3])) for line in explained if line.startswith("  both ")}
    assert records and listed == records, (records, explained)
    store = spark.read.format("delta").option("versionAsOf", before).load(job.store)
    wrote = store.where(f"_kind = 'gold.order_status' AND order_status__order_id = '{order}'") \
        .agg({"_batch_id": "max"}).first()[0]
    last = next(line for line in explained if line.startswith("last written by"))
    assert last.startswith(f"last written by the stream's batch {wrote} (app {job.app_id}, store version "), last
    assert next(line for line in explained if line.startswith("after it,")).startswith(
        "after it, the store changed by writes that are not the stream's: version "), "the outside UPDATE is named"


def test_gx_fails_the_run_on_its_own_when_the_fingerprint_diff_reports_equality(
        spark, restarted_stream, audited, monkeypatch):
    """A fingerprint diff that always says "exact" (a bug, or a hash collision) cannot hide a changed value."""
    job = restarted_stream.job
    table = next(t for t in stream_tables(target_of(job.settings, PIPELINE)) if t.label == "gold.order_status")
    before = spark.sql(f"DESCRIBE HISTORY delta.`{job.store}` LIMIT 1").first().version
    row = read_stream_table(spark, job.settings, table.stream).where("paid_cents > 0").orderBy("order_id").first()
    blind = lambda label, stream, batch, keys, buckets: TableDiff(  # noqa: E731
        label=label, keys=keys, stream_rows=stream.count(), batch_rows=batch.count(), matched=batch.count())
    monkeypatch.setattr("spark_apps.audit.auditor.diff_table", blind)
    try:
        spark.sql(f"UPDATE delta.`{job.store}` SET order_status__paid_cents = order_status__paid_cents + 1 "
                  f"WHERE _kind = 'gold.order_status' AND order_status__order_id = '{row.order_id}'")
        versions = dict.fromkeys(PIPELINE.stream_table_names(), before + 1)
        run = compare_with_snapshot(spark, job.settings, target_of(job.settings, PIPELINE), audited.snapshot,
                                    only=[table.label], versions=versions)
    finally:
        spark.sql(f"RESTORE TABLE delta.`{job.store}` TO VERSION AS OF {before}")
    verdict = run.verdicts[0]
    assert verdict.diff.exact, "the diff was blinded"
    assert not verdict.stream_equals_batch and not run.success
    samples = [s for e in verdict.gx.expectations if not e.success for s in e.samples]
    assert any(f"kind=values_differ, order_id={row.order_id}, differing_columns=paid_cents," in s for s in samples), \
        samples


def test_a_wrong_reconcile_argument_is_one_line(capsys):
    assert main(["reconcile", "--version", "3"]) == 1
    assert capsys.readouterr().err.strip() == "kappa reconcile: error: --version needs --table (the stream table " \
                                              "whose version to audit)"


def test_retention_preflight_refuses_when_the_log_lost_needed_offsets(spark, settings, make_topic, tmp_path,
                                                                      webhook):
    from kafka.admin import ConfigResource, ConfigResourceType

    from spark_apps.io.producer import make_producer
    from spark_apps.io.topics import admin_client

    local = settings.with_overrides(warehouse_dir=tmp_path / "warehouse", alerts_incidents=tmp_path / "incidents.json",
                                    alert_webhook_url=f"{webhook.url}/retention")
    topic = make_topic(f"test.retention.{uuid.uuid4().hex[:8]}", partitions=1)
    producer = make_producer(local)
    for i in range(20):
        producer.send(topic, key=b"k", value=json.dumps({"n": i}).encode())
    producer.flush()
    end = partition_offsets(local, topic)[0][1]
    position = StreamPosition(table_version=3, app_id="kappa-test", batch_id=2, topic=topic,
                              start_offsets={0: 0}, end_offsets={0: end})
    check_retention(spark, local, position, source="test")  # everything still there
    with admin_client(local) as admin:  # someone shortens retention outside the platform
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                            configs={"retention.ms": "200", "segment.ms": "200"})])

    def expired() -> bool:
        producer.send(topic, key=b"k", value=b"{}")  # a new record rolls the expired segment
        producer.flush()
        return partition_offsets(local, topic)[0][0] > 0

    poll(expired, timeout_s=90, every_s=2)
    producer.close()
    earliest = partition_offsets(local, topic)[0][0]
    assert earliest > 0, "the broker expired the old segment"
    with pytest.raises(RetentionError, match=rf"partition 0 lost offsets \[0,{min(earliest, end)}\)"):
        check_retention(spark, local, position, source="test")
    alert = spark.read.format("delta").load(str(table_path(local, "audit.alerts"))).first()
    assert alert.severity == "critical" and alert.dedup_key == f"retention:{topic}"

    # A replay would rebuild from the whole log and reconcile against the same truncated log: refused first.
    replaying = local.with_overrides(events_topic=topic, checkpoint_root=tmp_path / "checkpoints")
    with pytest.raises(RetentionError, match=rf"replay of marketplace of {topic} refused: .*partition 0 lost"):
        replay.build(spark, replaying, PIPELINE)
    assert generations.read(spark, replaying, PIPELINE.name) == [], "no generation is started"
    assert not (tmp_path / "checkpoints").exists(), "nothing was streamed"

    # The stream is rebuilt from what remains: the log holds all of its prefix again, and the incident closes.
    rebuilt = StreamPosition(table_version=1, app_id="kappa-test-rebuilt", batch_id=0, topic=topic,
                             start_offsets={0: earliest}, end_offsets={0: partition_offsets(local, topic)[0][1]})
    check_retention(spark, local, rebuilt, source="test")
    assert [(b["dedup_key"], b["action"]) for b in webhook.bodies("/retention")] == [
        (f"retention:{topic}", "trigger"), (f"retention:{topic}", "trigger"), (f"retention:{topic}", "resolve")]


def test_a_quality_rule_broken_by_matching_tables_pages_its_own_alert_with_sample_keys(
        spark, restarted_stream, audited, tmp_path):
    from spark_apps.alerts.dispatch import ALERTS_TABLE

    rules = tmp_path / "expectations" / "marketplace"
    rules.mkdir(parents=True)
    (rules / "gold.merchant_revenue.json").write_text(json.dumps({"expectations": [
        {"type": "unexpected_rows_expectation",
         "kwargs": {"unexpected_rows_query": "SELECT * FROM {batch} WHERE orders > 0",
                    "description": "no window has an order (a rule every window with orders breaks)"}},
        {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "currency", "value_set": ["XXX"]}}]}))
    settings = restarted_stream.job.settings.with_overrides(expectations_dir=tmp_path / "expectations",
                                                            alerts_incidents=tmp_path / "incidents.json")
    stored = settings.gx_dir / "gx" / "uncommitted" / "validations" / "marketplace" / "gold" / "merchant_revenue"

    def stored_results() -> int:
        return len(list(stored.rglob("*.json"))) if stored.exists() else 0

    results_before = stored_results()
    run = audit(spark, settings, target_of(settings, PIPELINE), only=["gold.merchant_revenue"])

    (verdict,) = run.verdicts
    assert verdict.stream_equals_batch and not verdict.gx.quality_ok and not run.success
    alerts = [r for r in spark.read.format("delta").load(str(table_path(settings, ALERTS_TABLE))).collect()
              if run.run_id in r.summary]
    assert [(a.dedup_key, a.severity) for a in alerts] == [("quality:marketplace:gold.merchant_revenue", "critical")]
    failing, column_rule = json.loads(alerts[0].details)["failing"]
    assert failing["expectation"].startswith("no window has an order") and failing["observed"].endswith("unexpected")
    assert column_rule["expectation"] == "expect_column_values_to_be_in_set", column_rule
    assert column_rule["samples"] and all(s.startswith("currency=") for s in column_rule["samples"]), column_rule
    assert stored_results() == results_before + 1, "validated again for the values caught, one result kept"
    windows_with_orders = read_stream_table(spark, settings, "gold.merchant_revenue").where("orders > 0").count()
    assert len(failing["samples"]) == min(5, windows_with_orders) > 0
    assert all(s.startswith("merchant_id=") and "window_start=" in s for s in failing["samples"]), failing
    assert alerts[0].runbook.endswith("#data-quality") and "(stream and batch agree)" in alerts[0].summary

    # The rules are fixed: the next audit finds them holding, and the incident closes.
    fixed = settings.with_overrides(expectations_dir=restarted_stream.job.settings.expectations_dir)
    assert audit(spark, fixed, target_of(fixed, PIPELINE), only=["gold.merchant_revenue"]).success
    resolved = [r for r in spark.read.format("delta").load(str(table_path(settings, ALERTS_TABLE))).collect()
                if r.dedup_key == "quality:marketplace:gold.merchant_revenue" and r.action == "resolve"]
    assert len(resolved) == 1 and resolved[0].severity == "info", resolved
