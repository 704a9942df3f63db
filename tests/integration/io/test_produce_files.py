"""`kappa produce --file` as a newcomer uses it: a folder of a CSV, a gzipped JSON-lines and a Parquet file with
bad cells of every kind, through the real broker, the stream and the audit. Nothing is refused and nothing lost:
the stream dead-letters exactly the bad records with the reasons the producer announced, and the reconciliation
is exact."""

from __future__ import annotations

import dataclasses
import datetime as dt
import gzip
import json
import re
import uuid
from collections import Counter
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_apps.audit.auditor import audit
from spark_apps.cli import main
from spark_apps.pipeline.declaration import load_pipeline
from spark_apps.stream.job import StreamJob
from spark_apps.target.resolution import target_of
from tests.support.streams import read_stream_table

pytestmark = pytest.mark.integration

SPEC = "tests.support.trip_pipeline:PIPELINE"


def csv_file(path, now: dt.datetime) -> Counter:
    at, day, ms = now.isoformat(), now.date().isoformat(), int(now.timestamp()) * 1000
    rows = [f"c1,north,{at},{day},3.5,12.50,true,{ms}",
            f"c2,north,{at},{day},far,1.00,false,{ms}",
            f"c3,south,{at},{day},1.0,lots,false,{ms}",
            f"c4,south,{at},{day},1.0,1.00,yes,{ms}",
            f"c5,south,{at},{day},1.0,1.00,false,{day}",
            f"c6,south,yesterday,{day},1.0,1.00,false,{ms}",
            f"c7,south,{at},21/11/2026,1.0,1.00,false,{ms}",
            f"c8,south,{at},{day},-1.0,1.00,false,{ms}",
            f"{'c' * 65},south,{at},{day},1.0,1.00,false,{ms}",
            "c10,south,too,few"]
    path.write_text("trip_id,zone,picked_up_at,service_day,distance_km,fare,shared,dropped_off_ms\n"
                    + "\n".join(rows) + "\n")
    return Counter({"wrong_type:distance_km": 1, "wrong_type:fare": 1, "wrong_type:shared": 1,
                    "wrong_type:dropped_off_ms": 1, "wrong_type:picked_up_at": 1, "wrong_type:service_day": 1,
                    "below_minimum:distance_km": 1, "oversized_value:trip_id": 1, "malformed_json": 1})


def json_lines_file(path, now: dt.datetime) -> Counter:
    good = {"trip_id": "j1", "zone": "east", "picked_up_at": now.isoformat(), "service_day": now.date().isoformat(),
            "distance_km": 2.0, "fare": 4.25, "shared": False, "dropped_off_ms": int(now.timestamp()) * 1000}
    lines = [json.dumps(good), '{"trip_id": "j2", "zone":', "[1, 2]",
             json.dumps({**good, "trip_id": "j4", "fare": "4.25"}),
             json.dumps({key: value for key, value in good.items() if key != "trip_id"}),
             json.dumps({**good, "trip_id": "j6", "record_type": "bus"}),
             json.dumps({**good, "trip_id": "j7", "schema_version": 2})]
    with gzip.open(path, "wt") as handle:
        handle.write("\n".join(lines) + "\n")
    return Counter({"malformed_json": 1, "not_a_json_object": 1, "wrong_type:fare": 1, "missing_field:trip_id": 1,
                    "unknown_event_type": 1, "unsupported_schema_version": 1})


def parquet_file(path, now: dt.datetime) -> Counter:
    naive = now.replace(tzinfo=None)
    pq.write_table(pa.table({
        "trip_id": ["p1", "p2", "p3", "p4"], "zone": ["west"] * 4,
        "picked_up_at": [naive, naive, None, naive], "service_day": [now.date()] * 4,
        "distance_km": [5.5, float("nan"), 1.0, 1.0],
        "fare": pa.array([Decimal("9.99"), Decimal("1.00"), Decimal("1.00"), Decimal("1.00")], pa.decimal128(10, 2)),
        "shared": ["true", "false", "false", "maybe"], "dropped_off_ms": [naive] * 4}), path)
    return Counter({"wrong_type:distance_km": 1, "missing_field:picked_up_at": 1, "wrong_type:shared": 1})


def test_files_with_bad_cells_of_every_kind_reach_the_log_and_the_stream_dead_letters_exactly_those(
        spark, settings, make_topic, tmp_path, monkeypatch, capsys):
    pipeline = dataclasses.replace(load_pipeline(SPEC), name="trip_files", table_prefix="trip_files_",
                                   topic=f"trips.files.{uuid.uuid4().hex[:8]}")
    make_topic(pipeline.topic, 2)
    config = settings.with_overrides(warehouse_dir=tmp_path / "warehouse", checkpoint_root=tmp_path / "checkpoints")
    for name, value in config.as_env().items():
        monkeypatch.setenv(name, value)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    folder = tmp_path / "trips"
    folder.mkdir()
    expected = (csv_file(folder / "a.csv", now) + json_lines_file(folder / "b.jsonl.gz", now)
                + parquet_file(folder / "c.parquet", now))

    assert main(["produce", "--pipeline", SPEC, "--file", str(folder), "--topic", pipeline.topic]) == 0

    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(f"produced 21 records to {pipeline.topic}"), line
    announced = re.search(r"the stream's parser dead-letters (\d+) of them: (.*)$", line)
    assert announced, line
    assert int(announced[1]) == sum(expected.values())
    assert Counter(dict((reason, int(count)) for reason, count in (part.rsplit(" ", 1)
                                                                   for part in announced[2].split(", ")))) == expected

    StreamJob(spark, config, target_of(config, pipeline)).run(until_caught_up=True)
    run = audit(spark, config, target_of(config, pipeline))

    assert run.success, [(v.table.label, v.diff.counts) for v in run.verdicts if not v.success]
    tables = pipeline.tables()
    dead = read_stream_table(spark, config, tables.dead_letters, pipeline).collect()
    assert Counter(row.reason for row in dead) == expected
    assert b"c10,south,too,few" in {bytes(row.value) for row in dead}, "a row of the wrong width keeps its text"
    gold = {row.zone: (row.trips, row.fares) for row in
            read_stream_table(spark, config, tables.gold("zone_daily"), pipeline).collect()}
    assert gold == {"north": (1, Decimal("12.50")), "east": (1, Decimal("4.25")), "west": (1, Decimal("9.99"))}
