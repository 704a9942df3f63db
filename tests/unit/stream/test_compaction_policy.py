"""Which gold tables the stream's own compaction folds, and which of their epochs: all of them when the tail is large
beside the base, else only the fresh epochs into a run of their own."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from spark_apps.io.delta_snapshot import FileStats, Unreadable
from spark_apps.pipeline.folds import BATCH
from spark_apps.stream.compaction import (
    MAX_RUNS,
    Tail,
    first_epoch_to_fold,
    newest_epoch,
    tails_of,
)
from spark_apps.transforms.store import COMPACTION, EPOCH, KIND


def test_a_tail_that_costs_at_least_the_ratio_of_its_base_folds_the_base_too():
    at_the_ratio = Tail({3: 100_000, 4: 23_500}, {3: 1, 4: 20}, batch=99)
    below_it = Tail({3: 100_000, 4: 23_499}, {3: 1, 4: 20}, batch=99)
    assert first_epoch_to_fold(at_the_ratio, 0.25) == 3
    assert first_epoch_to_fold(below_it, 0.25) == 4


def test_a_tails_rows_count_from_an_epoch():
    tail = Tail({3: 1_600, 4: 600}, {3: 1, 4: 20}, batch=99)
    assert (tail.rows_from(3), tail.rows_from(4), tail.rows_from(5)) == (2_200, 600, 0)


def test_a_large_base_waits_for_its_tail_while_a_small_one_is_compacted_every_epoch():
    order_status = Tail({7: 677_000, 8: 20_000}, {7: 4, 8: 20}, batch=179)
    merchant_revenue = Tail({7: 1_600, 8: 600}, {7: 1, 8: 20}, batch=179)
    assert first_epoch_to_fold(order_status, 0.4) == 8
    assert first_epoch_to_fold(merchant_revenue, 0.4) == 7


def test_a_large_base_is_left_alone_and_only_its_fresh_epochs_are_folded_into_a_run():
    order_status = Tail({7: 677_000, 8: 20_000, 9: 21_000}, {7: 1, 8: 20, 9: 20}, batch=199)
    assert first_epoch_to_fold(order_status, 0.4) == 8


def test_a_small_table_is_folded_whole_every_time():
    merchant_revenue = Tail({7: 1_600, 8: 600}, {7: 1, 8: 20}, batch=179)
    assert first_epoch_to_fold(merchant_revenue, 0.4) == 7


def test_a_base_of_many_files_never_compacted_counts_as_its_rows_in_one_file():
    never_compacted = Tail({0: 3_000, 1: 1_200}, {0: 27, 1: 20}, batch=39)
    assert first_epoch_to_fold(never_compacted, 0.4) == 0


def test_a_tail_grown_large_beside_its_base_is_folded_with_the_base():
    grown = Tail({7: 100_000, 8: 30_000, 9: 15_000}, {7: 1, 8: 1, 9: 20}, batch=199)
    assert first_epoch_to_fold(grown, 0.4) == 7


def test_runs_already_folded_stay_and_only_the_epochs_after_the_newest_are_folded():
    tail = Tail({2: 500_000, 5: 9_000, 6: 8_000, 7: 1_000, 8: 1_200}, {2: 1, 5: 1, 6: 1, 7: 20, 8: 20}, batch=179)
    assert first_epoch_to_fold(tail, 0.4) == 7


def test_runs_without_fresh_epochs_leave_nothing_to_fold():
    tail = Tail({2: 500_000, 5: 9_000, 6: 8_000}, {2: 1, 5: 1, 6: 1}, batch=139)
    assert first_epoch_to_fold(tail, 0.4) is None


def test_too_many_runs_are_folded_into_one_with_the_fresh_epochs():
    runs = {e: 1_000 for e in range(3, 3 + MAX_RUNS)}
    tail = Tail({2: 5_000_000, **runs, 20: 900}, {2: 1, **dict.fromkeys(runs, 1), 20: 20}, batch=419)
    assert first_epoch_to_fold(tail, 0.4) == 3


def test_a_ratio_of_zero_folds_every_epoch_unless_the_table_is_one_file():
    assert first_epoch_to_fold(Tail({4: 500_000, 5: 10}, {4: 1, 5: 1}, batch=119), 0) == 4
    assert first_epoch_to_fold(Tail({4: 500}, {4: 3}, batch=99), 0) == 4
    assert first_epoch_to_fold(Tail({4: 500_000}, {4: 1}, batch=99), 0) is None
    assert first_epoch_to_fold(Tail({}, {}, batch=-1), 0) is None


def test_a_lone_epoch_is_left_to_the_dags_run():
    assert first_epoch_to_fold(Tail({4: 500}, {4: 3}, batch=99), 0.4) is None


def _log(table: Path, *metas: dict | None) -> None:
    log = table / "_delta_log"
    log.mkdir(parents=True)
    for version, meta in enumerate(metas):
        info = {"operation": "WRITE", **({"userMetadata": json.dumps(meta)} if meta is not None else {})}
        (log / f"{version:020d}.json").write_text(json.dumps({"commitInfo": info}) + "\n")


class _AskedSpark:
    """Answers the fallback query with a fixed epoch, and remembers that it was asked."""

    def __init__(self, epoch: int) -> None:
        self.epoch, self.asked = epoch, []

    def sql(self, text: str):
        self.asked.append(text)
        return SimpleNamespace(first=lambda: [self.epoch])


def test_thenewest_epoch_is_read_from_the_newest_batch_commit_not_from_the_files(tmp_path):
    _log(tmp_path, None, {"batch_id": 0, "epoch": 0}, {"batch_id": 41, "epoch": 2},
         {COMPACTION: {"tables": {"t": 40}}}, {"batch_id": 42, "epoch": 2}, {"batch_id": 60, "epoch": 3})
    spark = _AskedSpark(99)
    assert newest_epoch(spark, tmp_path, "store", version=4) == 2
    assert newest_epoch(spark, tmp_path, "store", version=5) == 3
    assert spark.asked == []


def test_a_store_whose_batches_do_not_name_their_epoch_is_asked_by_a_query(tmp_path):
    _log(tmp_path, None, {"batch_id": 0}, {COMPACTION: {"tables": {"t": 40}}})
    spark = _AskedSpark(7)
    assert newest_epoch(spark, tmp_path, "store", version=2) == 7
    assert len(spark.asked) == 1


def _file(kind: str, epoch: int | None, records: int, batch: int | None) -> FileStats:
    return FileStats(f"{kind}-{epoch}-{records}.parquet", {KIND: kind, EPOCH: None if epoch is None else str(epoch)},
                     records, {} if batch is None else {BATCH: batch})


def test_a_tail_is_counted_from_the_logs_files_of_gold_kinds_in_finished_epochs():
    files = [_file("gold.a", 3, 1_000, 59), _file("gold.a", 4, 40, 80), _file("gold.a", 4, 60, 99),
             _file("gold.a", 5, 70, 100), _file("record", 4, 2_000, 99), _file("gold.b", 4, 5, 97)]
    assert tails_of(files, through=4) == {"gold.a": Tail({3: 1_000, 4: 100}, {3: 1, 4: 2}, batch=99),
                                          "gold.b": Tail({4: 5}, {4: 1}, batch=97)}
    assert tails_of(files, through=4)["gold.a"].files == 3


def test_a_gold_file_without_its_largest_batch_in_the_log_is_left_to_the_query():
    with pytest.raises(Unreadable, match="largest"):
        tails_of([_file("gold.a", 3, 10, None)], through=3)
