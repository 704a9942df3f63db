"""Great Expectations as a witness of its own: it finds every kind of difference between a stream table and its
batch snapshot and names the key, given only the two frames, never the fingerprint diff (real Spark, real GX).
That its failure alone fails a run is tested with the audited stream, in test_reconcile.py."""

from __future__ import annotations

import html
from pathlib import Path
from urllib.parse import urlparse

import pytest

from spark_apps.audit.expectations import SHOWN_ROWS, Validator

pytestmark = pytest.mark.integration

SCHEMA = "order_id long, status string, amount_cents long"
SNAPSHOT = [(1, "paid", 100), (2, "open", 200), (3, "shipped", 300)]

# Each corruption of the stream side, the kind of row GX must report, and the key it must name.
CORRUPTIONS = {
    "missing row": ([(1, "paid", 100), (3, "shipped", 300)], "kind=missing_in_stream, order_id=2"),
    "extra row": ([*SNAPSHOT, (4, "open", 50)], "kind=extra_in_stream, order_id=4"),
    "changed value": ([(1, "paid", 100), (2, "open", 999), (3, "shipped", 300)],
                      "order_id=2, differing_columns=amount_cents"),
    "duplicated key": ([*SNAPSHOT, (3, "shipped", 300)], "kind=copies_differ, order_id=3"),
}


@pytest.fixture(scope="module")
def validator(settings, tmp_path_factory) -> Validator:
    return Validator(settings.with_overrides(gx_dir=tmp_path_factory.mktemp("gx-witness")), "witness")


def docs_page(url: str) -> str:
    return html.unescape(Path(urlparse(url).path).read_text())


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_gx_alone_fails_each_kind_of_corruption_and_names_the_key_in_its_result_and_data_docs(
        spark, validator, corruption):
    rows, named = CORRUPTIONS[corruption]
    outcome = validator.validate(spark, "gold.witness", spark.createDataFrame(rows, SCHEMA),
                                 spark.createDataFrame(SNAPSHOT, SCHEMA), ("order_id",))
    assert not outcome.success and not outcome.stream_equals_batch
    failing = [e for e in outcome.expectations if e.compares_with_batch and not e.success]
    assert any(named in sample for e in failing for sample in e.samples), [e.samples for e in failing]
    index = validator.publish()
    assert named in docs_page(outcome.result_url), "the Data Docs page of the validation lists the key"
    suite_pages = Path(urlparse(index).path).parent / "expectations"
    assert [page for page in suite_pages.rglob("*.html") if "witness.gold.witness" in docs_page(page.as_uri())], \
        "the suite the validation page links to has its page"


def test_gx_passes_a_stream_table_equal_to_its_snapshot_in_another_row_order(spark, validator):
    outcome = validator.validate(spark, "gold.witness", spark.createDataFrame(SNAPSHOT[::-1], SCHEMA),
                                 spark.createDataFrame(SNAPSHOT, SCHEMA), ("order_id",))
    assert outcome.success and outcome.stream_equals_batch
    assert len([e for e in outcome.expectations if e.compares_with_batch]) == 1


def test_a_key_with_several_rows_is_compared_as_the_set_of_its_rows(spark, validator):
    """Keys are unique by the data-quality rules; when they are not, GX must neither invent a difference between
    equal copies nor miss one between different ones (and the quality rule still fails)."""
    doubled = [*SNAPSHOT, (3, "shipped", 300), (3, "lost", 0)]
    same = validator.validate(spark, "gold.witness", spark.createDataFrame(doubled[::-1], SCHEMA),
                              spark.createDataFrame(doubled, SCHEMA), ("order_id",))
    assert same.stream_equals_batch and not same.quality_ok
    one_changed = validator.validate(spark, "gold.witness",
                                     spark.createDataFrame([*doubled[:-1], (3, "lost", 1)], SCHEMA),
                                     spark.createDataFrame(doubled, SCHEMA), ("order_id",))
    assert not one_changed.stream_equals_batch
    samples = [s for e in one_changed.expectations if not e.success for s in e.samples]
    assert any(s.startswith("kind=values_differ, order_id=3, differing_columns=amount_cents,") for s in samples), \
        samples
    both_changed = validator.validate(spark, "gold.witness",
                                      spark.createDataFrame([*SNAPSHOT[:-1], (3, "lost", 1), (3, "lost", 2)], SCHEMA),
                                      spark.createDataFrame(doubled, SCHEMA), ("order_id",))
    assert not both_changed.stream_equals_batch
    samples = [s for e in both_changed.expectations if not e.success for s in e.samples]
    assert any(s.startswith("kind=rows_differ, order_id=3,") for s in samples), samples


def test_gx_counts_every_offending_key_when_there_are_more_than_it_shows(spark, validator):
    """Each row rule runs its query once, fetching one row more than a result shows; past that it must count the
    rows again, not report the ones it fetched."""
    many = [(i, "paid", 100 * i) for i in range(1, SHOWN_ROWS + 11)]
    outcome = validator.validate(spark, "gold.witness", spark.createDataFrame(many + many, SCHEMA),
                                 spark.createDataFrame(many, SCHEMA), ("order_id",))
    observed = {e.compares_with_batch: e.observed for e in outcome.expectations if not e.success}
    assert observed == {True: f"{len(many)} unexpected", False: f"{len(many)} unexpected"}, outcome.expectations
