"""The checkpoint rule the stream refuses to start on and maintenance alerts on, without Spark."""

from spark_apps.stream.checkpoint import checkpoint_problem

APP = "kappa-marketplace-1"


def test_checkpoint_and_commit_log_agree_with_one_batch_in_flight():
    assert checkpoint_problem(APP, {APP: 7}, done_before=7, done_after=7) == ""
    assert checkpoint_problem(APP, {APP: 8}, done_before=7, done_after=7) == "", "recorded, not yet committed"
    assert checkpoint_problem(None, {}, done_before=-1, done_after=-1) == "", "a stream that never ran"


def test_a_missing_checkpoint_while_tables_hold_batches_is_a_problem():
    assert checkpoint_problem(None, {APP: 3}, -1, -1).startswith(
        "the checkpoint is missing but the tables record batches up to 3")


def test_a_checkpoint_older_or_newer_than_the_tables_or_of_another_app_is_a_problem():
    assert "older than the tables" in checkpoint_problem(APP, {APP: 9}, 7, 7)
    assert "tables are behind the checkpoint" in checkpoint_problem(APP, {APP: 5}, 7, 7)
    assert "checkpoint belongs to" in checkpoint_problem(APP, {"kappa-marketplace-0": 2}, -1, -1)


def test_a_checkpoint_with_batches_but_no_app_id_was_not_made_by_the_platform():
    assert "not made by this platform" in checkpoint_problem(None, {}, -1, -1, planned=True)
    assert checkpoint_problem(APP, {APP: 0}, 0, 0, planned=True) == ""
