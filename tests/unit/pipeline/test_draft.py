"""`kappa init NAME --from FILE`: a pipeline drafted from a file's first rows, every guess said, every column of the
narrowest kind its values take, a history measured against the high-water mark, and a module that imports."""

from __future__ import annotations

import datetime as dt
import gzip
import importlib.util
import json
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_apps.cli import main
from spark_apps.core.errors import PlatformError
from spark_apps.io.event_files import sample_columns
from spark_apps.pipeline.draft import draft, infer_column, pipeline_module, pipeline_test_module
from spark_apps.pipeline.lateness import HIGH_WATER_MARK

NOW = dt.datetime(2026, 12, 6, tzinfo=dt.UTC).timestamp()
CSV = """order_id,customer_id,placed_at,amount,paid,items,weight
o1,c1,2026-12-05T23:50:00Z,12.50,true,2,1.5e3
o2,c2,2026-12-05T23:55:00+01:00,7.25,false,1,0.25
o3,c1,2026-12-05T23:58:00.125Z,100,TRUE,3,2
"""


def drafted(columns, text_typed=True, **flags):
    return draft("orders", "orders.csv", columns, text_typed, now_s=NOW, allowed_s=900, **flags)


def test_each_csv_column_gets_the_narrowest_kind_all_its_cells_take():
    kinds = {name: (c.kind, c.precision, c.scale)
             for name, c in ((name, infer_column(name, values, True)) for name, values in {
                 "flag": ["true", "False"], "count": ["1", "-2"], "price": ["12.50", "7", "0.125"],
                 "ratio": ["1.5e3", "2"], "day": ["2026-01-31", "2026-02-01"],
                 "at": ["2026-01-31T10:00:00Z", "2026-01-31T10:00:00.5+02:00"], "name": ["a", "12"],
                 "month": ["2026-02-30", "2026-01-01"]}.items())}
    assert kinds == {"flag": ("boolean", None, None), "count": ("long", None, None), "price": ("decimal", 18, 3),
                     "ratio": ("double", None, None), "day": ("date", None, None),
                     "at": ("timestamp", None, None), "name": ("string", None, None),
                     "month": ("string", None, None)}


def test_a_kind_nine_in_ten_values_take_wins_and_the_rest_are_named():
    column = infer_column("celsius", ["61.5"] * 9 + ["warm"], True)
    assert (column.kind, column.misfits, column.examples) == ("decimal", 1, ("warm",))
    assert infer_column("celsius", ["61.5"] * 8 + ["warm", "cold"], True).kind == "string"


def test_json_and_parquet_values_are_kinded_by_their_own_type_and_text_is_only_read_for_times():
    assert infer_column("n", [1, 2], False).kind == "long"
    assert infer_column("n", ["1", "2"], False).kind == "string"
    assert infer_column("x", [Decimal("1.25"), 3], False).kind == "decimal"
    assert infer_column("x", [1.5, 2.0], False).kind == "double"
    assert infer_column("at", [dt.datetime(2026, 1, 1)], False).kind == "timestamp"
    assert infer_column("at", ["2026-01-01T00:00:00Z"], False).kind == "timestamp"
    assert infer_column("d", [dt.date(2026, 1, 1)], False).kind == "date"
    assert infer_column("nested", [{"a": 1}], False).kind == "nested"


def test_a_column_some_rows_leave_out_is_optional_but_id_time_and_key_are_required():
    plan = drafted({"order_id": ["o1", "o2", "o3"], "customer_id": ["c1", None, "c2"],
                    "placed_at": ["2026-12-05T23:59:00Z"] * 3, "note": ["x", None, "y"]})
    assert plan.key_field == "customer_id"
    assert {c.name: c.required for c in plan.columns} == {"order_id": True, "customer_id": True,
                                                         "placed_at": True, "note": False}


def test_id_time_and_key_are_guessed_and_each_guess_is_said(tmp_path):
    (tmp_path / "orders.csv").write_text(CSV)
    sample = sample_columns([tmp_path / "orders.csv"])
    plan = drafted(sample.columns, sample.cells_are_text)
    assert (plan.id_field, plan.time_field, plan.key_field) == ("order_id", "placed_at", "customer_id")
    assert plan.notes[:3] == (
        "id: order_id (guessed: the id-like column with the most distinct values; --id names another)",
        "time: placed_at (guessed: the first column of times; --time names another)",
        "key: customer_id (guessed: the id-like column with the fewest distinct values; --key names another, or none)")
    assert not plan.history and plan.event_types == ("orders",)
    named = drafted(sample.columns, id_field="customer_id", key_field="none")
    assert (named.id_field, named.key_field, named.notes[0]) == ("customer_id", None, "id: customer_id")


@pytest.mark.parametrize(("flags", "message"), [
    ({"id_field": "nope"}, "--id nope: no column of that name can be a field; those that can: order_id"),
    ({"time_field": "amount"}, "--time amount: its values are not ISO-8601 times"),
])
def test_a_column_named_wrongly_is_one_line(flags, message):
    columns = {"order_id": ["o1"], "placed_at": ["2026-12-05T23:59:00Z"], "amount": ["1"]}
    with pytest.raises(PlatformError, match=message):
        drafted(columns, **flags)


@pytest.mark.parametrize(("columns", "message"), [
    ({"name": ["a"], "placed_at": ["2026-12-05T23:59:00Z"]}, "no column looks like an event id"),
    ({"order_id": ["o1"], "placed_at": ["2026-12-05 23:59:00"]}, "no column holds ISO-8601 times with an offset"),
])
def test_a_file_without_an_id_or_a_time_the_stream_can_read_is_one_line_naming_the_flag(columns, message):
    with pytest.raises(PlatformError, match=message):
        drafted(columns)


def test_a_file_of_history_is_measured_against_the_high_water_mark_and_says_why():
    plan = drafted({"order_id": ["o1", "o2"], "placed_at": ["2025-01-01T00:00:00Z", "2025-01-02T00:00:00Z"]})
    assert plan.history
    assert plan.notes[-1].startswith("lateness: against the log's high-water mark, since 2 of 2 sampled events")


def imported(path):
    """The module at ``path``, imported without leaving it importable by name."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_drafted_module_imports_as_a_pipeline_whose_gold_table_folds(tmp_path):
    (tmp_path / "orders.csv").write_text(CSV.replace("2026-12-05", "2024-01-05"))
    sample = sample_columns([tmp_path / "orders.csv"])
    plan = drafted(sample.columns, sample.cells_are_text)
    (tmp_path / "orders.py").write_text(pipeline_module(plan))
    PIPELINE = imported(tmp_path / "orders.py").PIPELINE  # noqa: N806 - the module's own name for it

    spec = {f.name: f.type_label for f in PIPELINE.schema.fields}
    assert spec == {"order_id": "string", "customer_id": "string", "placed_at": "timestamp",
                    "amount": "decimal(18,2)", "paid": "boolean", "items": "long", "weight": "double",
                    "event_type": "string", "schema_version": "long"}
    assert (PIPELINE.name, PIPELINE.topic, PIPELINE.table_prefix) == ("orders", "orders", "orders_")
    assert PIPELINE.lateness.against == HIGH_WATER_MARK
    (table,) = PIPELINE.gold_tables
    assert (table.name, table.primary_keys) == ("customer_daily", ("customer_id", "day"))
    assert table.fold.merge == ("sum(orders) AS orders", "min(min_amount) AS min_amount",
                                "max(max_amount) AS max_amount", "sum(sum_amount) AS sum_amount",
                                "min(min_items) AS min_items", "max(max_items) AS max_items",
                                "sum(sum_items) AS sum_items", "min(min_weight) AS min_weight",
                                "max(max_weight) AS max_weight")
    test = pipeline_test_module(plan, "data/orders.csv")
    compile(test, "test_orders.py", "exec")
    assert 'FILE = Path(__file__).parent / "data/orders.csv"' in test
    too_long = [line for text in (pipeline_module(plan), test) for line in text.splitlines() if len(line) > 120]
    assert not too_long


def test_columns_no_field_can_be_named_are_left_out_and_said_and_an_impossible_time_is_only_a_misfit():
    columns = {"_id": ["a", "b"], "order_id": ["o1", "o2"], "unit price": ["1", "2"], "x__y": ["1", "2"],
               "placed_at": ["2026-12-05T23:59:00Z"] * 9 + ["2026-02-30T00:00:00Z"], "tags": [[1], [2]]}
    columns = {name: (values * 5)[:10] for name, values in columns.items()}
    plan = drafted(columns)
    assert [c.name for c in plan.columns] == ["order_id", "placed_at"]
    assert plan.notes[0] == ("left out '_id', 'unit price', 'x__y': a field's name is letters, digits and single "
                             "underscores, starting with a letter (rename the column to keep it)")
    assert plan.notes[1].startswith("left out tags: no value of a kind a field holds")
    assert plan.by_name["placed_at"].misfits == 1


def test_generated_names_never_collide_with_the_files_columns_or_each_other():
    columns = {"day": ["x", "y"], "event_day": ["x", "y"], "order_id": ["o1", "o2"], "events": ["1", "2"],
               "placed_at": ["2026-12-05T23:59:00Z"] * 2}
    plan = draft("min_events", "f.csv", columns, True, now_s=NOW, allowed_s=900)
    assert plan.day == "event_date" and plan.count == "events"
    assert len({*plan.group, plan.count, *(alias for _, _, alias in plan.measures)}) == 2 + len(plan.measures)


@pytest.mark.parametrize(("name", "message"), [
    ("json", "a module of that name is importable already"),
    ("two__parts", "single underscores between them"),
    ("ends_", "single underscores between them"),
])
def test_a_pipeline_name_that_would_shadow_a_module_or_confuse_table_names_is_refused(name, message):
    with pytest.raises(PlatformError, match=message):
        draft(name, "f.csv", {"order_id": ["o1"], "at": ["2026-12-05T23:59:00Z"]}, True, now_s=NOW,
              allowed_s=900)


def test_json_lines_and_parquet_are_sampled_with_their_own_types(tmp_path):
    lines = [{"event_id": "e1", "at": "2026-12-05T23:59:00Z", "amount": 1.25}, "not json",
             {"event_id": "e2", "at": "2026-12-05T23:58:00Z", "amount": 3}]
    with gzip.open(tmp_path / "a.jsonl.gz", "wt") as handle:
        handle.write("\n".join(json.dumps(line) if isinstance(line, dict) else line for line in lines))
    sample = sample_columns([tmp_path / "a.jsonl.gz"])
    assert (sample.rows, sample.unreadable, sample.cells_are_text) == (2, 1, False)
    assert sample.columns["amount"] == [Decimal("1.25"), 3]
    pq.write_table(pa.table({"event_id": ["e1"], "at": [dt.datetime(2026, 1, 1, tzinfo=dt.UTC)]}),
                   tmp_path / "b.parquet")
    parquet = sample_columns([tmp_path / "b.parquet"])
    assert parquet.cells_are_text and parquet.columns["at"] == [dt.datetime(2026, 1, 1, tzinfo=dt.UTC)]


def test_kappa_init_writes_the_module_and_its_test_and_never_overwrites_unasked(tmp_path, capsys, monkeypatch):
    (tmp_path / "orders.csv").write_text(CSV)
    monkeypatch.chdir(tmp_path)
    assert main(["init", "orders", "--from", "orders.csv"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "read the first 3 rows of orders.csv"
    assert out.splitlines()[-1] == ("wrote orders.py and test_orders.py; next: kappa produce --pipeline "
                                    "orders:PIPELINE --file orders.csv")
    assert main(["init", "orders", "--from", "orders.csv"]) == 1
    assert "orders.py and test_orders.py already exist; add --force" in capsys.readouterr().err
    assert main(["init", "Bad-Name", "--from", "orders.csv"]) == 1
    assert "pipeline name 'Bad-Name'" in capsys.readouterr().err
