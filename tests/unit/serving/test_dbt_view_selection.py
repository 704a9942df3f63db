"""Which staging views a selective dbt run creates first: every view the selected models may read."""

from __future__ import annotations

import pytest

from spark_apps.serving.dbt_runner import view_selection


@pytest.mark.parametrize(("term", "core"), [
    ("source:marketplace+", "source:marketplace"),
    ("+order_funnel", "order_funnel"),
    ("2+order_funnel+1", "order_funnel"),
    ("@merchant_daily", "merchant_daily"),
    ("tag:finance", "tag:finance"),
])
def test_each_term_selects_the_views_of_its_node_its_descendants_and_all_their_ancestors(term, core):
    assert view_selection([term]) == [f"config.materialized:view,@{core}"]


def test_every_part_of_an_intersection_and_every_term_of_a_union_gets_its_views():
    assert view_selection(["source:sensors+,tag:daily", "marts"]) == [
        "config.materialized:view,@source:sensors", "config.materialized:view,@tag:daily",
        "config.materialized:view,@marts"]
