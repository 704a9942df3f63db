"""The data-quality page, built from a verdict put together by hand (no Spark, no GX)."""

import datetime as dt
from types import SimpleNamespace

from spark_apps.audit.auditor import quality_alert
from spark_apps.audit.expectations import ExpectationOutcome, SuiteOutcome
from spark_apps.audit.verdict import AuditRun, TableVerdict


def verdict(matches: bool) -> TableVerdict:
    outcomes = [ExpectationOutcome("the stream has as many rows as the batch snapshot", matches, "", True),
                ExpectationOutcome("net = gross - refunds", False, "2 unexpected", False,
                                   ("merchant_id=m1, window_start=2026-11-21 19:22:00",
                                    "merchant_id=m7, window_start=x")),
                ExpectationOutcome("keys unique and not null", True, "0 unexpected", False)]
    table = SimpleNamespace(label="gold.merchant_revenue", stream="gold.merchant_revenue")
    diff = SimpleNamespace(exact=matches)
    return TableVerdict(table, 7, 3, diff, SuiteOutcome("s", False, "file:///gx/result.html", outcomes))


def run() -> AuditRun:
    position = SimpleNamespace(end_offsets={0: 40, 1: 60})
    return AuditRun(run_id="kappa_reconcile.1", pipeline="marketplace", position=position, snapshot=None,
                    started_at=dt.datetime(2026, 11, 24, tzinfo=dt.UTC))


def test_a_quality_failure_on_matching_tables_is_its_own_critical_alert_naming_rule_count_and_rows():
    alert = quality_alert(run(), verdict(matches=True))
    assert (alert.severity, alert.dedup_key, alert.table) == (
        "critical", "quality:marketplace:gold.merchant_revenue", "gold.merchant_revenue")
    assert alert.summary == ("gold.merchant_revenue: data-quality rules failed in reconciliation kappa_reconcile.1 "
                             "(stream and batch agree): net = gross - refunds (2 unexpected), e.g. merchant_id=m1, "
                             "window_start=2026-11-21 19:22:00 | merchant_id=m7, window_start=x")
    assert alert.details["failing"] == [{"expectation": "net = gross - refunds", "observed": "2 unexpected",
                                         "samples": ["merchant_id=m1, window_start=2026-11-21 19:22:00",
                                                     "merchant_id=m7, window_start=x"]}]
    assert alert.runbook.endswith("#data-quality") and alert.versions == {"gold.merchant_revenue": 7}
    assert alert.offsets == {0: 40, 1: 60}


def test_the_quality_alert_says_when_stream_and_batch_differ_as_well():
    assert "(stream and batch also differ)" in quality_alert(run(), verdict(matches=False)).summary
