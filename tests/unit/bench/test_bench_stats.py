"""The benchmark's arithmetic: what its figures mean must not drift silently."""

import pytest

from bench import stats
from bench.page import render
from bench.run import parse_args


def test_percentiles_are_nearest_rank_and_empty_samples_give_none():
    values = list(range(1, 101))
    assert stats.percentiles(values) == {"p50": 50, "p95": 95, "p99": 99}
    assert stats.percentiles([7.0]) == {"p50": 7.0, "p95": 7.0, "p99": 7.0}
    assert stats.percentiles([]) == {"p50": None, "p95": None, "p99": None}


def test_each_record_gets_the_visibility_time_of_the_batch_whose_offsets_hold_it():
    ranges = {4: ({0: 0, 1: 0}, {0: 10, 1: 5}), 5: ({0: 10, 1: 5}, {0: 20, 1: 5})}
    visible = {4: 100.0, 5: 110.0}
    records = [(0, 0, 99.0), (0, 9, 98.5), (0, 10, 105.0), (1, 4, 97.0), (1, 5, 109.0), (2, 0, 1.0)]
    assert stats.record_latencies(records, ranges, visible) == [1.0, 1.5, 5.0, 3.0]


def test_records_of_untimed_batches_have_no_latency():
    ranges = {1: ({0: 0}, {0: 10}), 2: ({0: 10}, {0: 20})}
    assert stats.record_latencies([(0, 3, 1.0), (0, 15, 2.0)], ranges, {2: 4.0}) == [2.0]


def test_merge_points_track_table_size_from_every_earlier_commit():
    history = [
        {"version": 2, "operation": "MERGE", "operationMetrics": {
            "executionTimeMs": "900", "numTargetRowsInserted": "30", "numTargetRowsDeleted": "5",
            "numTargetRowsUpdated": "2", "numTargetRowsCopied": "40", "numTargetFilesRemoved": "1"}},
        {"version": 0, "operation": "CREATE TABLE", "operationMetrics": {}},
        {"version": 1, "operation": "MERGE", "operationMetrics": {"executionTimeMs": "800",
                                                                  "numTargetRowsInserted": "100"}},
        {"version": 3, "operation": "OPTIMIZE", "operationMetrics": {"numRemovedFiles": "4"}},
        {"version": 4, "operation": "MERGE", "operationMetrics": {"executionTimeMs": "1000"}},
    ]
    points = stats.merge_cost_points(history)
    assert [(p["version"], p["rows_before"]) for p in points] == [(1, 0), (2, 100), (4, 125)]
    assert points[1]["rows_changed"] == 37 and points[1]["rows_copied"] == 40 and points[1]["files_removed"] == 1


def test_flatness_compares_the_last_third_of_merges_with_the_first():
    flat = [{"execution_ms": 100} for _ in range(9)]
    growing = [{"execution_ms": 100 * (i + 1)} for i in range(9)]
    assert stats.flatness(flat) == 1.0
    assert stats.flatness(growing) == 4.0
    assert stats.flatness(flat[:2]) is None


def test_growth_exponent_is_one_for_linear_time_and_two_for_quadratic():
    assert stats.growth({1_000: 10.0, 10_000: 100.0})[0]["exponent"] == 1.0
    assert stats.growth({1_000: 10.0, 10_000: 1000.0})[0]["exponent"] == 2.0


def test_stage_totals_sum_every_batch_largest_first():
    totals = stats.stage_totals([{"parse": 1.0, "gold": 3.0}, {"parse": 0.5, "gold": 2.0, "bronze": 0.25}])
    assert list(totals.items()) == [("gold", 5.0), ("parse", 1.5), ("bronze", 0.25)]


def test_page_shows_the_ratio_to_the_limit_and_each_latency_percentile():
    doc = {"measured_at": "now", "machine": {"cores": 2}, "producer": {"records_per_s": 9000.0},
           "limit": {"records_per_s": 40000.0}, "platform": {"records_per_s": 10000.0, "per_batch": [],
                                                             "stage_seconds": {"parse": 2.0}},
           "platform_to_limit": 0.25,
           "latency": [{"target_rate": 1000, "latency_s": {"p50": 2.5, "p95": 4.0, "p99": 6.25}}],
           "sizes": [], "merge_cost": {}}
    page = render(doc)
    assert "<b>25%</b>" in page and "1,000/s p99" in page and "6.25 s" in page and "40,000 records/s" in page


@pytest.mark.parametrize("argv", [["--sizes", "10,5"], ["--sizes", "ten"], ["--rates", "0"], ["--batch", "0"]])
def test_bad_arguments_are_refused_with_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err
