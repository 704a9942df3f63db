"""`kappa produce --file`: JSON lines, CSV and Parquet files (gzipped, or a folder of them) become Kafka records
keyed by the schema's entity key. A record that is not a valid event is sent as it is, for the stream to
dead-letter with a reason; strict, it refuses the file in one readable line, and nothing is sent."""

from __future__ import annotations

import dataclasses
import datetime as dt
import gzip
import io
import json
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_apps.cli import main
from spark_apps.core.errors import PlatformError
from spark_apps.io import event_files
from spark_apps.io.event_files import FileRecord, late_on_arrival, read_records
from spark_apps.io.event_files import event_files as files_of
from spark_apps.marketplace.events import SCHEMA
from spark_apps.pipeline.lateness import LatenessRule
from tests.support.sensor_pipeline import SCHEMA as SENSORS
from tests.support.trip_pipeline import SCHEMA as TRIPS

ORDER = {"event_id": "e1", "event_type": "order_placed", "event_time": "2026-11-21T19:22:03.123Z",
         "schema_version": 1, "order_id": "o1", "customer_id": "c1", "merchant_id": "m1", "amount_cents": 1250,
         "currency": "EUR", "item_count": 2}


def json_lines(text: str, schema, strict: bool = False) -> list[FileRecord]:
    return list(event_files.json_lines(io.StringIO(text), schema, strict=strict))


def csv_rows(text: str, schema, strict: bool = False) -> list[FileRecord]:
    return list(event_files.csv_rows(io.StringIO(text, newline=""), schema, strict=strict))


def read_events(path, schema, strict: bool = True) -> list[FileRecord]:
    return list(read_records(files_of(path), schema, strict=strict))


def test_json_lines_are_sent_as_written_keyed_by_the_entity_key():
    line = json.dumps(ORDER)
    records = json_lines(f"{line}\n\n  {json.dumps({**ORDER, 'event_id': 'e2', 'order_id': 'o2'})}  \n", SCHEMA)
    assert [(r.line, r.key) for r in records] == [(1, b"o1"), (3, b"o2")]
    assert records[0].value == line.encode()


def test_csv_rows_become_typed_json_in_header_order_and_empty_cells_are_left_out():
    text = ("event_id,event_type,event_time,schema_version,order_id,customer_id,merchant_id,amount_cents,currency,"
            "item_count,channel\n"
            "e1,order_placed,2026-11-21T19:22:03.123Z,1,o1,c1,m1,1250,EUR,2,\n"
            '"e2",order_placed,2026-11-21T19:22:04.000Z, 2 ,o2,c1,m1,0,EUR,1,"web, app"\n')
    records = csv_rows(text, SCHEMA)
    assert [r.key for r in records] == [b"o1", b"o2"]
    assert json.loads(records[0].value) == ORDER
    assert list(json.loads(records[0].value)) == list(ORDER), "fields in header order"
    second = json.loads(records[1].value)
    assert (second["schema_version"], second["amount_cents"], second["channel"]) == (2, 0, "web, app")


def test_another_pipelines_schema_types_and_keys_its_own_fields():
    records = csv_rows("reading_id,kind,measured_at,schema_version,device_id,celsius_tenths\n"
                       "r1,reading,2026-11-21T19:22:03.123Z,1,d7,-15\n", SENSORS)
    assert records[0].key == b"d7" and json.loads(records[0].value)["celsius_tenths"] == -15


def test_csv_cells_of_doubles_decimals_booleans_and_epoch_timestamps_become_their_json_types():
    records = csv_rows("trip_id,zone,distance_km,fare,shared,service_day,dropped_off_ms\n"
                       "t1,north,3.25,12.50,TRUE,2026-11-21,1795289000000\n", TRIPS)
    value = records[0].value.decode()
    assert '"fare":12.50' in value, "a decimal keeps every digit it was written with"
    assert json.loads(value) == {"record_type": "trip", "schema_version": 1, "trip_id": "t1", "zone": "north",
                                 "distance_km": 3.25, "fare": 12.5, "shared": True, "service_day": "2026-11-21",
                                 "dropped_off_ms": 1795289000000}
    assert records[0].key == b"north"


def test_a_csv_without_type_or_version_columns_gets_the_pipelines_only_type_and_version():
    records = csv_rows("reading_id,measured_at,device_id,celsius_tenths\nr1,2026-11-21T19:22:03Z,d7,215\n", SENSORS)
    assert json.loads(records[0].value) == {"kind": "reading", "schema_version": 1, "reading_id": "r1",
                                            "measured_at": "2026-11-21T19:22:03Z", "device_id": "d7",
                                            "celsius_tenths": 215}


def test_a_csv_column_wins_over_the_implied_value_so_a_wrong_type_still_reaches_the_dead_letters():
    records = csv_rows("reading_id,kind,measured_at,device_id\nr1,alarm,2026-11-21T19:22:03Z,d7\n", SENSORS)
    assert json.loads(records[0].value)["kind"] == "alarm"


def test_a_csv_without_a_type_column_is_sent_as_it_is_when_the_pipeline_has_several_types():
    records = csv_rows("event_id,event_time,schema_version\ne1,2026-11-21T19:22:03Z,1\n", SCHEMA)
    assert "event_type" not in json.loads(records[0].value), "the parser names it: missing_field:event_type"


@pytest.mark.parametrize(("cell", "message"), [
    ("shared\nyes", "shared must be true or false, got 'yes'"),
    ("fare\nNaN", "fare must be a finite number, got 'NaN'"),
    ("distance_km\n3,5", "2 values under a header of 1 fields"),
    ("dropped_off_ms\n2026-11-21", "dropped_off_ms must be a whole number"),
])
def test_strict_a_csv_cell_that_cannot_have_its_fields_kind_is_refused(cell, message):
    with pytest.raises(PlatformError, match=message):
        csv_rows(cell + "\n", TRIPS, strict=True)


def test_a_csv_cell_that_cannot_have_its_fields_kind_is_sent_as_its_text_for_the_parser_to_dead_letter():
    records = csv_rows("trip_id,zone,distance_km,fare,shared,dropped_off_ms\n"
                       "t1,north,far,NaN,yes,2026-11-21\n", TRIPS)
    assert json.loads(records[0].value) == {"record_type": "trip", "schema_version": 1, "trip_id": "t1",
                                            "zone": "north", "distance_km": "far", "fare": "NaN", "shared": "yes",
                                            "dropped_off_ms": "2026-11-21"}
    assert records[0].key == b"north"


def test_a_csv_row_of_the_wrong_width_is_sent_as_its_text_unkeyed():
    records = csv_rows('trip_id,zone\nt1,north,"3,5"\nt2,south\n', TRIPS)
    assert [(r.line, r.key, r.value) for r in records][0] == (2, None, b't1,north,"3,5"')
    assert records[1].key == b"south"


def test_a_line_that_is_not_a_json_object_is_sent_as_its_bytes_unkeyed():
    records = json_lines('{"trip_id": "t1", "zone": "north"}\n{"trip_id": \n[1, 2]\n{"fare": NaN}\n', TRIPS)
    assert [(r.key, r.value) for r in records[1:]] == [(None, b'{"trip_id":'), (None, b"[1, 2]"),
                                                       (None, b'{"fare": NaN}')], "NaN is not JSON"


def test_json_lines_get_the_pipelines_only_type_and_version_and_keep_every_byte_they_had():
    records = json_lines('{"trip_id": "t1", "fare": 12.50, "zone": "north"}\n{}\n{"record_type": "x"}\n', TRIPS)
    assert records[0].value == b'{"record_type":"trip","schema_version":1,"trip_id": "t1", "fare": 12.50, ' \
                               b'"zone": "north"}'
    assert records[0].key == b"north"
    assert json.loads(records[1].value) == {"record_type": "trip", "schema_version": 1}
    assert json.loads(records[2].value) == {"schema_version": 1, "record_type": "x"}, "a column the line has wins"


@pytest.mark.parametrize(("name", "text", "message"), [
    ("events.jsonl", '{"event_id": "e1"}\n{"event_id": \n', "events.jsonl line 2: not JSON"),
    ("events.jsonl", '{"event_id": "e1"}\n[1, 2]\n', "events.jsonl line 2: not a JSON object but list"),
    ("events.csv", "event_id,amount_cents\ne1,12.5\n", "events.csv line 2: amount_cents must be a whole number, "
                                                      "got '12.5'"),
    ("events.csv", "event_id,order_id\ne1,o1,extra\n", "events.csv line 2: 3 values under a header of 2 fields"),
])
def test_strict_a_record_that_is_not_an_event_refuses_the_file_in_one_line(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    assert len(read_events(path, SCHEMA, strict=False)) == 2 if name.endswith("jsonl") else 1
    with pytest.raises(PlatformError) as raised:
        read_events(path, SCHEMA)
    assert message in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize(("name", "text", "message"), [
    ("events.csv", "", "events.csv: no header row"),
    ("events.csv", "event_id,event_id\ne1,e2\n", "header names event_id more than once"),
    ("events.csv", "event_id,\ne1,x\n", "header column 2 has no name"),
    ("events.txt", "{}", "cannot tell the format"),
    ("events.csv", "event_id,order_id\ne1," + "o" * 200_000 + "\n", "events.csv line 2: not CSV (field larger than"),
    ("events.parquet", "not parquet", "cannot read it as Parquet"),
    ("events.csv.gz", "not gzip", "cannot read it"),
])
def test_a_file_that_cannot_be_read_is_one_line_naming_it_even_when_permissive(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(PlatformError) as raised:
        read_events(path, SCHEMA, strict=False)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(PlatformError, match="no such file of events"):
        read_events(tmp_path / "absent.jsonl", SCHEMA)


def test_gzipped_files_and_a_folder_of_files_are_read_in_name_order(tmp_path):
    with gzip.open(tmp_path / "b.csv.gz", "wt") as gz:
        gz.write("trip_id,zone\nt2,south\n")
    with gzip.open(tmp_path / "a.jsonl.gz", "wt") as gz:
        gz.write('{"trip_id": "t1", "zone": "north"}\n')
    (tmp_path / "_SUCCESS").write_text("")
    (tmp_path / "notes.txt").write_text("not events")
    records = read_events(tmp_path, TRIPS)
    assert [json.loads(r.value)["trip_id"] for r in records] == ["t1", "t2"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PlatformError, match="a folder without files of events"):
        read_events(empty, TRIPS)


def test_parquet_rows_become_typed_json_and_values_that_cannot_be_their_kind_are_sent_as_text(tmp_path):
    picked_up = dt.datetime(2026, 11, 21, 19, 22, 3, 250_000)
    table = pa.table({
        "trip_id": ["t1", "t2"], "zone": ["north", None], "picked_up_at": [picked_up, picked_up],
        "service_day": [dt.date(2026, 11, 21), dt.date(2026, 11, 22)],
        "distance_km": [3.25, float("nan")],
        "fare": pa.array([Decimal("12.50"), Decimal("1.05")], pa.decimal128(10, 2)),
        "shared": [True, False], "dropped_off_ms": [picked_up, picked_up], "extra": [7, 8]})
    pq.write_table(table, tmp_path / "trips.parquet", row_group_size=1)
    first, second = read_events(tmp_path / "trips.parquet", TRIPS, strict=False)
    millis = int(picked_up.replace(tzinfo=dt.UTC).timestamp()) * 1000 + 250
    assert first.value.decode() == (
        '{"record_type":"trip","schema_version":1,"trip_id":"t1","zone":"north",'
        '"picked_up_at":"2026-11-21T19:22:03.250000+00:00","service_day":"2026-11-21","distance_km":3.25,'
        f'"fare":12.50,"shared":true,"dropped_off_ms":{millis},"extra":7}}')
    assert (first.line, first.key, second.key) == (1, b"north", None), "a null is left out"
    assert json.loads(second.value)["distance_km"] == "nan", "the parser dead-letters it: wrong_type:distance_km"
    with pytest.raises(PlatformError, match="trips.parquet row 2: distance_km must be a finite number, got nan"):
        read_events(tmp_path / "trips.parquet", TRIPS)


def test_the_share_of_events_late_on_arrival_counts_only_times_the_parser_can_read():
    now = dt.datetime(2026, 12, 6, 12, tzinfo=dt.UTC)
    at = lambda moment: FileRecord(1, None, json.dumps({"event_time": moment}).encode())  # noqa: E731
    records = [at((now - dt.timedelta(days=365)).isoformat()), at((now - dt.timedelta(seconds=60)).isoformat()),
               at("2025-12-06T12:00:00"), at(17), FileRecord(2, None, b"not json"),
               at((now - dt.timedelta(hours=2)).isoformat().replace("+00:00", "Z"))]
    assert late_on_arrival(records, SCHEMA, LatenessRule(900), now.timestamp()) == (3, 2)
    millis = [FileRecord(1, None, json.dumps({"dropped_off_ms": 1_000}).encode())]
    trips = dataclasses.replace(TRIPS, time_field="dropped_off_ms")
    assert late_on_arrival(millis, trips, LatenessRule(900), now.timestamp()) == (1, 1)


def test_the_cli_refuses_a_file_of_history_under_the_append_time_rule_before_reaching_kafka(tmp_path, capsys,
                                                                                            monkeypatch):
    monkeypatch.setenv("KAPPA_KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    monkeypatch.setattr("spark_apps.io.topics.ensure_topic",
                        lambda settings, name=None, partitions=None: pytest.fail("no broker needed"), raising=True)
    path = tmp_path / "history.jsonl"
    year_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=365)
    path.write_text("".join(json.dumps({**ORDER, "event_id": f"e{n}", "event_time": year_ago.isoformat()}) + "\n"
                            for n in range(5)))
    assert main(["produce", "--file", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"kappa produce: error: 5 of the first 5 events of {path} are more than 900s older than "
                          "now: pipeline marketplace's lateness rule (against append_time) would flag them late")
    assert "declare Lateness(against=HIGH_WATER_MARK)" in err and "--accept-late" in err and "\n" not in err


def test_strict_the_cli_reports_a_bad_file_before_reaching_kafka(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KAPPA_KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    monkeypatch.setattr("spark_apps.io.topics.ensure_topic",
                        lambda settings, name=None, partitions=None: pytest.fail("no broker needed"), raising=True)
    path = tmp_path / "events.csv"
    path.write_text("event_id,amount_cents\ne1,lots\n")
    assert main(["produce", "--file", str(path), "--strict"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "kappa produce: error: events.csv line 2: amount_cents must be a whole number, got 'lots'"


@pytest.mark.parametrize("argv", [["produce", "--duration", "inf", "--rate", "1"],
                                  ["produce", "--duration", "1", "--rate", "nan"],
                                  ["produce", "--duration", "1e400", "--rate", "1"]])
def test_an_infinite_or_not_a_number_count_is_refused_by_the_argument_parser(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "expected a finite number, got" in err[-1] and "Traceback" not in "\n".join(err)


@pytest.mark.parametrize(("argv", "message"), [
    (["produce", "--pipeline", "nosuch"], "no pipeline named 'nosuch'"),
    (["produce", "--pipeline", "tests.support.sensor_pipeline:PIPELINE"],
     "pipeline 'sensors' declares no generator of synthetic events"),
    (["produce", "--file", "x.jsonl", "--seed", "3"], "--seed: options of the generator"),
    (["chaos", "--pipeline", "tests.support.sensor_pipeline:PIPELINE"], "declares no generator"),
])
def test_a_pipeline_that_cannot_serve_the_command_is_one_line(argv, message, capsys):
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_schema_prints_any_pipelines_schema(capsys):
    assert main(["schema", "--pipeline", "tests.support.sensor_pipeline:PIPELINE"]) == 0
    out = capsys.readouterr().out
    assert "`celsius_tenths` | long" in out and "order_id" not in out
    assert main(["schema"]) == 0
    assert "`order_id` | string" in capsys.readouterr().out
