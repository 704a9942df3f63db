"""The overview page as a pure function of what the warehouse recorded (no Spark, no browser)."""

from __future__ import annotations

import datetime as dt

from spark_apps.ops.overview import Overview, Switch, Verdict, batch_timings, concerns, incidents, render

T0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def ms(seconds: float) -> int:
    return int(at(seconds).timestamp() * 1000)


def test_a_batch_s_latency_is_its_records_wait_from_append_to_commit_and_its_lag_what_later_batches_held():
    committed = {0: ms(10), 1: ms(20)}
    # batch 0: 3 records appended at 4 s, 1 at 9 s; batch 1: 5 records appended at 8 s (before batch 0 committed)
    # and 2 at 15 s.
    found = batch_timings(committed, [(0, ms(4), 3), (0, ms(9), 1), (1, ms(8), 5), (1, ms(15), 2)])
    first, second = found
    assert (first.batch_id, first.records, first.latency_max_s, first.latency_p50_s) == (0, 4, 6.0, 6.0)
    assert first.lag_records == 5, "the five records appended at 8 s were in the log when batch 0 committed"
    assert (second.records, second.latency_max_s, second.latency_p50_s, second.lag_records) == (7, 12.0, 12.0, 0)
    assert second.committed_at == at(20)


def test_a_batch_without_records_waits_for_nothing():
    empty, = batch_timings({3: ms(5)}, [])
    assert (empty.records, empty.latency_max_s, empty.latency_p50_s, empty.lag_records) == (0, 0.0, 0.0, 0)


def test_the_incidents_of_a_pipeline_are_found_by_name_dag_and_topic():
    mine = ["reconcile:shop:gold.a", "quality:shop:gold.a", "dbt:shop", "stream:shop:down", "replay:shop:g2",
            "maintenance:shop:tables", "airflow:kappa_shop_reconcile:reconcile", "deadline:kappa_shop_reconcile",
            "retention:shop.events"]
    others = ["reconcile:shopping:gold.a", "dbt:shopping", "airflow:kappa_shopping_dbt:dbt", "retention:other"]
    assert all(concerns(key, "shop", "shop.events") for key in mine)
    assert not any(concerns(key, "shop", "shop.events") for key in others)


def test_repeated_triggers_fold_into_one_incident_that_its_resolve_closes():
    found = incidents([("k", "critical", at(0), "first", "trigger"), ("k", "critical", at(5), "again", "trigger"),
                       ("k", "info", at(9), "resolved: k", "resolve"), ("k", "critical", at(20), "back", "trigger"),
                       ("j", "info", at(1), "resolved: j", "resolve")])
    assert [(i.dedup_key, i.opened_at, i.summary, i.resolved_at) for i in found] == [
        ("k", at(20), "back", None), ("k", at(0), "first", at(9))], "newest first; a lone resolve is no incident"


def test_the_page_plots_what_was_recorded_and_says_what_was_not():
    verdicts = [Verdict(f"r{i}", table, at(3600 * i), at(3600 * i + 60), "full", not (i == 2 and table == "gold.a"),
                        10 * i, 10 * i) for i in range(4) for table in ("gold.a", "gold.b")]
    switches = [Switch("gold.a", at(0), "lambda", "lambda", "first run"),
                Switch("gold.a", at(3600), "kappa", "lambda", "2 exact runs over 3600s"),
                Switch("gold.a", at(7200), "lambda", "kappa", "run r2 differs")]
    page = render(Overview("shop", at(4 * 3600), verdicts, [], switches,
                           incidents([("reconcile:shop:gold.a", "critical", at(7200), "r2 differs", "trigger")])))
    for plotted in ("verdicts", "rows", "audits", "serving", "incidents"):
        assert f'<figure class="plot" id="{plotted}"><svg' in page, plotted
    for missing in ("latency", "lag"):
        assert f'<p class="note" id="{missing}">nothing recorded yet</p>' in page
    assert "last reconciliation r3 EXACT; 0 of 1 gold tables serve the stream; 1 open incident(s)" in page
    assert "kappa &rarr; lambda</td><td class=\"l\">run r2 differs" in page
    assert '<span class="bad">open</span>' in page
    assert "<script" not in page, "one file with nothing to run or fetch"
