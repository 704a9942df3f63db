"""The benchmark's arithmetic: what its figures mean must not drift silently."""

import pytest

from bench import stats
from bench.page import render
from bench.run import FULL, QUICK, batch_summaries, parse_args


def test_percentiles_are_nearest_rank_and_empty_samples_give_none():
    values = list(range(1, 101))
    assert stats.percentiles(values) == {"p50": 50, "p95": 95, "p99": 99}
    assert stats.percentiles([7.0]) == {"p50": 7.0, "p95": 7.0, "p99": 7.0}
    assert stats.percentiles([]) == {"p50": None, "p95": None, "p99": None}


def test_each_record_gets_the_visibility_time_of_the_batch_whose_offsets_hold_it():
    ranges = {4: ({0: 0, 1: 0}, {0: 10, 1: 5}), 5: ({0: 10, 1: 5}, {0: 20, 1: 5})}
    visible = {4: 100.0, 5: 110.0}
    records = [(0, 0, 99.0), (0, 9, 98.5), (0, 10, 105.0), (1, 4, 97.0), (1, 5, 109.0), (2, 0, 1.0)]
    assert stats.record_latencies(records, ranges, visible) == [(99.0, 1.0), (98.5, 1.5), (105.0, 5.0),
                                                                (97.0, 3.0)]


def test_records_of_untimed_batches_have_no_latency():
    ranges = {1: ({0: 0}, {0: 10}), 2: ({0: 10}, {0: 20})}
    assert stats.record_latencies([(0, 3, 1.0), (0, 15, 2.0)], ranges, {2: 4.0}) == [(2.0, 2.0)]


def test_growth_exponent_is_one_for_linear_time_and_two_for_quadratic():
    assert stats.growth({1_000: 10.0, 10_000: 100.0})[0]["exponent"] == 1.0
    assert stats.growth({1_000: 10.0, 10_000: 1000.0})[0]["exponent"] == 2.0


def test_stage_totals_sum_every_batch_largest_first():
    totals = stats.stage_totals([{"parse": 1.0, "gold": 3.0}, {"parse": 0.5, "gold": 2.0, "bronze": 0.25}])
    assert list(totals.items()) == [("gold", 5.0), ("parse", 1.5), ("bronze", 0.25)]


def test_latency_timeline_buckets_records_by_append_time_since_the_first():
    points = [(100.0, 3.0), (104.9, 1.0), (101.0, 2.0), (105.0, 7.0), (117.0, 4.0)]
    assert stats.latency_timeline(points, bucket_s=5.0) == [
        {"t_s": 0.0, "records": 3, "p50": 2.0, "max": 3.0},
        {"t_s": 5.0, "records": 1, "p50": 7.0, "max": 7.0},
        {"t_s": 15.0, "records": 1, "p50": 4.0, "max": 4.0}]
    assert stats.latency_timeline([]) == []


def test_per_batch_gives_the_total_mean_median_and_max_of_the_batches_counts():
    assert stats.per_batch({3: 40, 4: 50, 5: 45, 6: 61}) == {"batches": 4, "total": 196, "mean": 49.0,
                                                                 "p50": 45, "max": 61}
    assert stats.per_batch({}) == {"batches": 0, "total": 0, "mean": None, "p50": None, "max": None}


def test_a_batchs_table_size_is_the_records_of_every_batch_before_it():
    batches = [{"records": 200, "seconds": 5.0}, {"records": 50, "seconds": 2.0}, {"records": 10, "seconds": 1.0}]
    assert [p["rows_before"] for p in stats.table_size_points(batches)] == [0, 200, 250]


def test_the_few_records_left_after_batches_of_a_fixed_size_are_not_one_of_them():
    points = [{"rows_before": 0, "records": 1999}, {"rows_before": 1999, "records": 1998},
              {"rows_before": 3997, "records": 3}]
    assert stats.batches_of_size(points, 2000) == points[:2]


def test_batch_cost_growth_is_the_large_table_median_over_the_small_table_median():
    points = [{"rows_before": rows, "records": 100, "seconds": seconds} for rows, seconds in
              [(0, 10.0), (50, 12.0), (100, 14.0), (500, 99.0), (1000, 30.0), (2000, 36.0)]]
    growth = stats.batch_cost_growth(points, small_max=100, large_min=1000)
    assert growth["small"] == {"batches": 3, "p50_s": 12.0, "records_p50": 100}
    assert growth["large"]["batches"] == 2 and growth["large"]["p50_s"] == 30.0
    assert growth["ratio"] == 2.5


def test_batch_cost_growth_has_no_ratio_without_batches_at_both_table_sizes():
    assert stats.batch_cost_growth([{"rows_before": 0, "records": 1, "seconds": 1.0}])["ratio"] is None


def test_batch_cost_growth_compares_only_the_same_size_batches_and_charts_every_batch_by_run_order():
    doc = {"sizes": [{"stream": {"per_batch": [{"records": 60_000, "seconds": 9.0, "jobs": 40},
                                                {"records": 1_000_000, "seconds": 20.0, "jobs": 50}]}}],
           "latency": [{"per_batch": [{"records": 2_000, "seconds": 18.0, "jobs": 30}]}],
           "same_size_batches": [{"rows_before": rows, "records": 2_000, "seconds": seconds, "tables": tables}
                                 for rows, seconds, tables in [(1_060_000, 12.0, "run"), (50_000, 6.0, "small"),
                                                               (52_000, 8.0, "small"), (1_062_000, 14.0, "run")]]}
    summary = batch_summaries(doc)
    assert summary["jobs_per_batch"]["total"] == 90 and summary["jobs_per_batch"]["batches"] == 2
    growth = summary["batch_cost_growth"]
    assert [p["rows_before"] for p in growth["every_batch"]] == [0, 60_000, 1_060_000]
    assert growth["small"] == {"batches": 2, "p50_s": 6.0, "records_p50": 2_000}
    assert growth["large"] == {"batches": 2, "p50_s": 12.0, "records_p50": 2_000}
    assert growth["ratio"] == 2.0, "the 200,000- and 2,000-record batches of the catch-up and latency runs stay out"


def test_a_run_without_same_size_batches_has_no_batch_cost_ratio():
    doc = {"sizes": [{"stream": {"per_batch": [{"records": 200_000, "seconds": 30.0, "jobs": 40}]}}],
           "latency": [{"per_batch": [{"records": 2_000, "seconds": 10.0, "jobs": 30}]}]}
    assert batch_summaries(doc)["batch_cost_growth"]["ratio"] is None


def test_quick_runs_one_size_and_one_rate_and_explicit_options_still_win():
    quick = parse_args(["--quick"])
    assert (quick.sizes, quick.rates, quick.latency_seconds) == (QUICK["sizes"], QUICK["rates"], 60)
    assert quick.sizes == [200_000] and quick.rates == [1000] and quick.file_mib == 100
    assert parse_args(["--quick", "--rates", "500"]).rates == [500]
    full = parse_args([])
    assert (full.quick, full.sizes, full.rates) == (False, FULL["sizes"], FULL["rates"])


def test_page_shows_the_ratio_to_the_limit_and_each_latency_percentile():
    doc = {"measured_at": "now", "machine": {"cores": 2}, "producer": {"records_per_s": 9000.0},
           "limit": {"records_per_s": 40000.0}, "platform": {"records_per_s": 10000.0, "per_batch": [],
                                                             "stage_seconds": {"parse": 2.0}},
           "platform_to_limit": 0.25,
           "latency": [{"target_rate": 1000, "latency_s": {"p50": 2.5, "p95": 4.0, "p99": 6.25}}],
           "file_producer": {"records_per_s": 30000.0, "file_bytes": 2**30, "mb_per_s": 12.5, "peak_rss_mib": 80.4},
           "status": {"seconds": 2.34, "ledger_runs_added": 1000, "airflow": "running at http://127.0.0.1:8080"},
           "sizes": []}
    page = render(doc)
    assert "<b>25%</b>" in page and "1,000/s p99" in page and "6.25 s" in page and "40,000 records/s" in page
    assert "a 1,024 MiB CSV at 12.5 MB/s with a peak memory of 80 MiB" in page
    assert "answered in 2.3 s at the slowest over a ledger of 1,000 more runs, Airflow running at" in page


@pytest.mark.parametrize("argv", [["--sizes", "10,5"], ["--sizes", "ten"], ["--rates", "0"], ["--batch", "0"]])
def test_bad_arguments_are_refused_with_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_page_charts_latency_over_time_and_batch_cost_against_table_size():
    doc = {"measured_at": "now", "sizes": [],
           "latency": [{"target_rate": 1000, "latency_s": {"p50": 2.5}, "timeline": [
               {"t_s": 0.0, "records": 5, "p50": 2.0, "max": 3.0}]}],
           "jobs_per_batch": {"batches": 2, "total": 180, "mean": 90.0, "p50": 88, "max": 92},
           "commits_per_batch": {"batches": 2, "total": 2, "mean": 1.0, "p50": 1, "max": 1},
           "serving_reads": {"tail_partial_rows": {"gold.x": 40}, "uncompacted": {"gold.x": {
               "one_key_s": 0.25, "full_scan_s": 0.5}}, "compacted": {"gold.x": {"one_key_s": 0.125,
                                                                           "full_scan_s": 0.375}}},
           "batch_cost_growth": {"small_max_rows": 100_000, "large_min_rows": 1_000_000, "ratio": 1.5,
                                 "small": {"batches": 3, "p50_s": 10.0, "records_p50": 2_000},
                                 "large": {"batches": 3, "p50_s": 15.0, "records_p50": 2_000},
                                 "points": [{"rows_before": 50_000, "records": 2_000, "seconds": 10.0}],
                                 "every_batch": [{"rows_before": 0, "records": 200_000, "seconds": 30.0}]}}
    page = render(doc)
    assert "1,000/s p50" in page and "table rows before the batch" in page
    assert "every micro-batch of the run" in page and "micro-batches of one size" in page
    assert "180 Spark jobs over 2" in page and "Micro-batches of 2,000 records" in page and "ratio 1.50" in page
    assert "Delta commits: mean 1.0, p50 1, max 1 a batch" in page
    assert "<td>gold.x</td><td>0.250</td><td>0.125</td><td>0.500</td><td>0.375</td>" in page


def test_the_audit_figures_are_the_full_and_incremental_audits_of_the_largest_log():
    sizes = [{"events": 1_000_000, "recompute_and_reconcile": {"seconds": 272.1, "exact_match": True},
              "incremental_audit": {"log_events": 1_100_000, "new_events": 100_000, "seconds": 27.21,
                                    "exact_match": True}},
             {"events": 250_000, "recompute_and_reconcile": {"seconds": 152.0, "exact_match": True}},
             {"events": 2_000_000}]
    assert stats.audit_figures(sizes) == {
        "full": {"log_events": 1_000_000, "seconds": 272.1, "exact_match": True},
        "incremental": {"log_events": 1_100_000, "new_events": 100_000, "seconds": 27.21, "exact_match": True,
                        "share_of_full": 0.1}}
    assert stats.audit_figures(sizes[1:])["incremental"] is None
    assert stats.audit_figures([{"events": 10}]) == {"full": None, "incremental": None}


def test_each_production_is_dated_after_the_one_before_or_from_now_if_that_is_later(monkeypatch):
    from bench import measures

    now = {"s": 1_000.0}
    monkeypatch.setattr(measures.time, "time", lambda: now["s"])
    clock = measures.EventClock()
    assert clock.dating(10_000, 1000.0) == 1_000_000, "the first starts now"
    now["s"] = 1_002.0
    assert clock.dating(500, 100.0) == 1_010_000, "produced in 2 s, dated over 10 s: the next continues its line"
    now["s"] = 2_000.0
    assert clock.dating(1, 1000.0) == 2_000_000, "the wall clock has passed the line: from now"


def test_a_childs_peak_memory_is_its_own_not_the_peak_of_the_process_that_started_it():
    import subprocess
    import sys

    held = bytearray(300 * 2**20)
    held[::4096] = b"\1" * len(held[::4096])
    code = "from bench.file_producer import peak_resident_kib; print(peak_resident_kib())"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(child.stdout) < 200 * 1024, "the child reported the parent's 300 MiB"
    del held
