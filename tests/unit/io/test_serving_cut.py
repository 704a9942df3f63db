"""The serving cut's pure parts: what its view says, what it records, and when it is consistent."""

from __future__ import annotations

import json

from spark_apps.io.serving_cut import (
    FOLLOWS_AUDIT,
    FOLLOWS_STREAM,
    Cut,
    Member,
    cut_from_properties,
    cut_view_query,
    table_view_query,
    view_statements,
)

STREAM_CUT = Cut("marketplace", FOLLOWS_STREAM, "g2", "batch 7 of app-1", (
    Member("gold.order_status", "gold.order_status__g2", 12, {0: 40, 1: 35}),
    Member("gold.merchant_revenue", "gold.merchant_revenue__g2", 9, {0: 40, 1: 35})), warehouse="/w")
COLUMNS = {"order_status": [("order_id", "string"), ("status", "string")],
           "merchant_revenue": [("merchant_id", "string"), ("net_cents", "bigint")]}
# Each member's source as SQL at its version: here a batch snapshot's folder, for a stream table its view of the store.
RELATIONS = {"gold.order_status__g2": "delta.`/w/gold.db/order_status__g2` VERSION AS OF 12",
             "gold.merchant_revenue__g2": "delta.`/w/gold.db/merchant_revenue__g2` VERSION AS OF 9"}


def test_a_cut_round_trips_through_its_view_properties():
    assert cut_from_properties(STREAM_CUT.properties()) == STREAM_CUT


def test_a_cut_whose_tables_reflect_different_offsets_is_not_consistent():
    assert STREAM_CUT.consistent
    torn = Cut("marketplace", FOLLOWS_AUDIT, "", "run r1", (
        Member("gold.order_status", "batch.order_status", 3, {0: 40}),
        Member("gold.merchant_revenue", "gold.merchant_revenue", 9, {0: 41})))
    assert not torn.consistent
    assert "NOT CONSISTENT" in torn.describe()[0]


def test_the_cut_view_pins_every_table_to_its_version_in_a_branch_of_its_own():
    branches = cut_view_query(STREAM_CUT, RELATIONS, COLUMNS).split(" UNION ALL ")
    assert len(branches) == 3, "one branch per gold table and one for the cut itself"
    orders, revenue, described = branches
    assert orders.endswith("FROM delta.`/w/gold.db/order_status__g2` VERSION AS OF 12")
    assert revenue.endswith("FROM delta.`/w/gold.db/merchant_revenue__g2` VERSION AS OF 9")
    assert "`order_id` AS `order_status__order_id`" in orders
    assert "CAST(NULL AS bigint) AS `merchant_revenue__net_cents`" in orders
    assert "`net_cents` AS `merchant_revenue__net_cents`" in revenue
    assert "FROM" not in described, "the cut's own branch is one row that reads no table"
    recorded = json.loads(_cut_literal(described))
    assert recorded["basis"] == "batch 7 of app-1"
    assert [(m["table"], m["version"], m["end_offsets"]) for m in recorded["members"]] == [
        ("gold.order_status", 12, {"0": 40, "1": 35}), ("gold.merchant_revenue", 9, {"0": 40, "1": 35})]


def test_a_serving_view_selects_its_own_branch_under_its_own_column_names():
    assert table_view_query("marketplace", "gold.order_status", ["order_id", "status"]) == (
        "SELECT `order_status__order_id` AS `order_id`, `order_status__status` AS `status` "
        "FROM serving._cut_marketplace WHERE served_table = 'order_status'")


def test_an_existing_view_is_altered_in_place_never_dropped_and_created_again():
    """Spark's CREATE OR REPLACE VIEW drops the view first: a reader in between would find none."""
    query, properties = "SELECT 1 AS x", {"kappa.cut.basis": "run it's"}
    assert view_statements("serving.v", False, query, properties, "new") == [
        "CREATE VIEW serving.v TBLPROPERTIES ('kappa.cut.basis' = 'run it\\'s', 'comment' = 'new') AS SELECT 1 AS x"]
    altered = view_statements("serving.v", True, query, properties, "moved")
    assert altered == ["ALTER VIEW serving.v AS SELECT 1 AS x",
                       "ALTER VIEW serving.v SET TBLPROPERTIES ('kappa.cut.basis' = 'run it\\'s', "
                       "'comment' = 'moved')"]
    assert not any("REPLACE" in statement or "DROP" in statement for statement in altered)


def _cut_literal(branch: str) -> str:
    """The JSON string literal of the cut's own branch, unquoted."""
    literal = branch.rsplit(" AS cut", 1)[0].rsplit(", '", 1)[1].rstrip("'")
    return literal.replace("\\'", "'").replace("\\\\", "\\")
