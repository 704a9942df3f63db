"""How one gold key's explanation is put together and printed (no Spark)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from spark_apps.audit.explain import (
    CONFLICT_ROLE,
    DUPLICATE_ROLE,
    WINNER_ROLE,
    Explanation,
    FeedingEvent,
    StreamWrite,
    explain_command,
    outside_writes,
    parse_key,
    role,
)
from spark_apps.core.errors import PlatformError

AT = dt.datetime(2026, 12, 7, 8, 30, 1, 250000)


def test_a_key_is_every_primary_key_column_once_in_the_table_s_order():
    assert parse_key(["window_start=2026-12-07 08:00:00", "merchant_id=m-1", "currency=EUR"],
                     ("merchant_id", "window_start", "currency"), "gold.merchant_revenue") == {
        "merchant_id": "m-1", "window_start": "2026-12-07 08:00:00", "currency": "EUR"}
    with pytest.raises(PlatformError, match=r"^gold.order_status is keyed by order_id; got customer_id$"):
        parse_key(["customer_id=c-1"], ("order_id",), "gold.order_status")
    with pytest.raises(PlatformError, match="give column=value"):
        parse_key(["o-17"], ("order_id",), "gold.order_status")


def test_the_report_s_command_quotes_what_a_shell_would_split():
    assert explain_command("marketplace", "gold.merchant_revenue", {"merchant_id": "m-1",
                                                                    "window_start": "2026-12-07 08:00:00"}) == (
        "kappa explain --pipeline marketplace --table gold.merchant_revenue --key merchant_id=m-1 "
        "--key 'window_start=2026-12-07 08:00:00'")


def test_a_copy_that_is_not_its_id_s_winner_is_a_duplicate_or_a_conflict_by_its_payload():
    assert role(True, "f1", "f1") == WINNER_ROLE
    assert role(False, "f1", "f1") == DUPLICATE_ROLE
    assert role(False, "f2", "f1") == CONFLICT_ROLE
    assert role(False, "f2", None) == CONFLICT_ROLE


def test_the_explanation_shows_both_rows_the_records_once_and_the_batch_that_wrote_the_key():
    shared = FeedingEvent("e-1", 1, 233, AT, WINNER_ROLE, False)
    found = Explanation(
        "gold.order_status", {"order_id": "o-17"}, "run-1", "gold.order_status", 14, "batch.order_status", 3,
        stream_rows=[{"order_id": "o-17", "paid_cents": 2501}], batch_rows=[{"order_id": "o-17", "paid_cents": 2500}],
        stream_events=[shared, FeedingEvent("e-1", 2, 7, AT, DUPLICATE_ROLE, True)], batch_events=[shared],
        last_write=StreamWrite(5, "app-a", 11, {1: 200}, {1: 240, 2: 9}), outside_writes=[(13, "UPDATE")])
    lines = found.lines()
    assert lines[0] == ("gold.order_status order_id=o-17: reconciliation run-1 compared gold.order_status version 14 "
                        "with batch.order_status version 3")
    assert [line.split() for line in lines[2:4]] == [["order_id", "o-17", "o-17"],
                                                     ["paid_cents", "2501", "2500", "<-", "differs"]]
    assert "2 record(s) feed it in the stream, 1 in the batch:" in lines
    rows = [line.split() for line in lines if line.startswith("  both") or line.startswith("  stream")]
    assert rows == [["both", "e-1", "1", "233", "2026-12-07", "08:30:01.250", "winner", "no"],
                    ["stream", "e-1", "2", "7", "2026-12-07", "08:30:01.250", "duplicate", "yes"]]
    assert lines[-2] == ("last written by the stream's batch 5 (app app-a, store version 11, offsets p1=[200,240), "
                         "p2=[0,9))")
    assert lines[-1] == "after it, the store changed by writes that are not the stream's: version 13 UPDATE"


def commit(log, version: int, operation: str, meta: dict | None = None) -> None:
    info = {"timestamp": 1, "operation": operation, **({"userMetadata": json.dumps(meta)} if meta else {})}
    (log / f"{version:020d}.json").write_text(json.dumps({"commitInfo": info}) + "\n")


def test_the_writes_after_the_batch_that_are_neither_the_stream_s_nor_maintenance_are_named(tmp_path):
    log = tmp_path / "_delta_log"
    log.mkdir()
    commit(log, 0, "CREATE TABLE")
    commit(log, 1, "WRITE", {"app_id": "a", "batch_id": 0})
    commit(log, 2, "UPDATE")
    commit(log, 3, "WRITE", {"app_id": "a", "batch_id": 1})
    commit(log, 4, "OPTIMIZE")
    commit(log, 5, "WRITE", {"compaction": {"table": "t"}})
    commit(log, 6, "DELETE")
    commit(log, 7, "MERGE")
    assert outside_writes(tmp_path, 1, 6) == [(2, "UPDATE"), (6, "DELETE")]
    assert outside_writes(tmp_path, 3, 7) == [(6, "DELETE"), (7, "MERGE")]
