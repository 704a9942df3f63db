"""The chaos checker's matching logic, on the generator's real manifests and hand-made table contents."""

from __future__ import annotations

from spark_apps.lab.checker import (
    check,
    check_table,
    content_fields,
    detail_lines,
    expectations,
    record_values,
    summary_line,
)
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.pipeline.synthetic import GeneratorRequest, Manifest, manifest_of
from tests.support.sensor_pipeline import SCHEMA as SENSOR_SCHEMA

TABLES = PIPELINE.tables()
SCHEMA = PIPELINE.schema
REQUEST = GeneratorRequest(seed=5, events=600, hard_cases=True)
generate = PIPELINE.generator


def manifest_and_values(request: GeneratorRequest = REQUEST) -> tuple[Manifest, dict[int, bytes]]:
    records = list(generate(request))
    return manifest_of(request, records), {r.seq: r.value for r in records}


def content(event_id: str, payload: dict) -> tuple:
    return (event_id, *(payload.get(name) for name in content_fields(SCHEMA)[1:]))


def faithful_tables(manifest: Manifest, values: dict[int, bytes]) -> dict[str, list]:
    """What the stream tables hold when every record was processed exactly once."""
    records = {r["seq"]: r for r in manifest.records}
    events = manifest.valid_events | manifest.late_events
    return {
        TABLES.bronze: list(values.values()),
        TABLES.dead_letters: [(values[seq], reason) for seq, reason in manifest.malformed.items()],
        TABLES.events: [content(event_id, payload) for event_id, payload in events.items()],
        TABLES.late_events: [content(event_id, payload) for event_id, payload in manifest.late_events.items()],
        TABLES.duplicates: [(records[seq]["event_id"], "duplicate") for seq in manifest.duplicates]
        + [(c["event_id"], "conflict") for c in manifest.conflicts],
    }


def test_tables_holding_every_record_once_give_all_zeros():
    manifest, values = manifest_and_values()
    assert manifest.duplicates and manifest.conflicts and manifest.late_events and manifest.malformed
    result = check(expectations([(manifest, values)], TABLES, SCHEMA), faithful_tables(manifest, values))
    assert result.exact
    assert summary_line(result) == "lost=0 duplicated=0 unexpected=0"
    assert [t.found for t in result.tables] == [t.expected for t in result.tables]


def test_a_replayed_micro_batch_shows_as_duplicated_rows_of_the_tables_it_reached():
    manifest, values = manifest_and_values()
    tables = faithful_tables(manifest, values)
    replayed = tables[TABLES.bronze][100:130]
    tables[TABLES.bronze] += replayed
    tables[TABLES.events].append(tables[TABLES.events][0])
    result = check(expectations([(manifest, values)], TABLES, SCHEMA), tables)
    assert (result.lost, result.duplicated, result.unexpected) == (0, 31, 0)
    by_table = {t.table: t.duplicated for t in result.tables}
    assert by_table[TABLES.bronze] == 30 and by_table[TABLES.events] == 1


def test_a_record_missing_from_bronze_is_lost_by_its_sequence_number():
    manifest, values = manifest_and_values()
    tables = faithful_tables(manifest, values)
    del tables[TABLES.bronze][42]
    result = check(expectations([(manifest, values)], TABLES, SCHEMA), tables)
    bronze = result.tables[0]
    assert (bronze.lost, result.lost, result.duplicated, result.unexpected) == (1, 1, 0, 0)
    assert bronze.samples == {"lost": ["(0, 42)"]}


def test_a_conflicting_resend_that_wins_is_one_lost_and_one_unexpected_event():
    manifest, values = manifest_and_values()
    tables = faithful_tables(manifest, values)
    conflicted = manifest.conflicts[0]["event_id"]
    amount = content_fields(SCHEMA).index("amount_cents")
    tables[TABLES.events] = [row[:amount] + (row[amount] + 1,) + row[amount + 1:] if row[0] == conflicted else row
                             for row in tables[TABLES.events]]
    result = check(expectations([(manifest, values)], TABLES, SCHEMA), tables)
    assert (result.lost, result.duplicated, result.unexpected) == (1, 0, 1)
    assert "lost=1 duplicated=0 unexpected=1" in detail_lines(result)[2]


def test_a_byte_identical_resend_is_expected_twice_in_bronze_and_a_third_copy_is_duplicated():
    result = check_table("bronze", {1: b"a", 2: b"b", 3: b"a"}, [b"a", b"b", b"a", b"a"])
    assert (result.lost, result.duplicated, result.unexpected) == (0, 1, 0)
    short = check_table("bronze", {1: b"a", 2: b"b", 3: b"a"}, [b"a", b"b"])
    assert (short.lost, short.samples["lost"]) == (1, ["3"])


def test_rows_no_record_explains_are_unexpected_and_a_missing_table_loses_everything():
    result = check({"t": {1: "x"}, "empty": {7: "y", 8: "z"}}, {"t": ["x", "stray", "stray"]})
    assert [(t.table, t.lost, t.duplicated, t.unexpected) for t in result.tables] == [("t", 0, 0, 2),
                                                                                      ("empty", 2, 0, 0)]
    assert result.as_json()["unexpected"] == 2


def test_record_values_regenerates_the_bytes_of_exactly_the_records_sent():
    records = list(generate(REQUEST))[:250]
    manifest = manifest_of(REQUEST, records)
    assert record_values(manifest, generate) == {r.seq: r.value for r in records}


def test_records_of_several_producer_runs_are_told_apart_by_run():
    first, first_values = manifest_and_values()
    request = GeneratorRequest(seed=6, events=200, base_time_ms=REQUEST.base_time_ms + 60_000)
    second, second_values = manifest_and_values(request)
    records = list(generate(request))
    tables = faithful_tables(first, first_values)
    for name, rows in faithful_tables(second, second_values).items():
        tables[name] += rows
    expected = expectations([(first, first_values), (second, second_values)], TABLES, SCHEMA)
    assert check(expected, tables).exact
    del tables[TABLES.bronze][-1]
    assert check(expected, tables).tables[0].samples == {"lost": [f"(1, {records[-1].seq})"]}


def test_events_are_compared_by_the_id_and_content_their_schema_names():
    assert content_fields(SCHEMA)[:1] == ("event_id",) and "amount_cents" in content_fields(SCHEMA)
    assert "event_time" not in content_fields(SCHEMA)
    assert content_fields(SENSOR_SCHEMA) == ("reading_id", "kind", "schema_version", "device_id", "celsius_tenths")
