"""The exactly-once checker of the chaos suite: which generated records were lost, duplicated or unexpected.

Flink's ``ValidatingExactlyOnceSink`` gives every record a unique sequence number and checks the sink for each one.
Here the generator's manifest is that ledger: every record it sent has a sequence number, every valid or late event
a unique event id. For each stream table the checker knows which of them must appear, with which content, and
exactly once:

- ``bronze.events_raw``: every record sent (by its bytes; a byte-identical re-send is a second expected row);
- ``audit.dead_letters``: every malformed record, with its expected reason;
- ``silver.events``: every valid and late event id, with the amount of its *first* record (a conflicting re-send
  that won would show as one lost and one unexpected row);
- ``silver.late_events``: every late event id;
- ``silver.duplicates``: every duplicate and conflicting re-send, by event id and kind.

A table row matching no expected record is *unexpected*; an expected record found more often than sent is
*duplicated*; one found less often is *lost*. The pure part (:func:`check`, :func:`expectations`) takes plain
values, so the unit tests need no Spark; :func:`check_tables` reads the tables.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from spark_apps.marketplace.generator import GeneratorConfig, Manifest, generate
from spark_apps.pipeline.declaration import TableNames

# How many offending identities a result keeps per table and kind: enough to debug, bounded for the JSON report.
SAMPLE = 10


@dataclass(frozen=True)
class TableCheck:
    """One table against the manifests. Lost samples name (run, sequence number) or event ids, the others row keys."""

    table: str
    expected: int
    found: int
    lost: int
    duplicated: int
    unexpected: int
    samples: dict[str, list[str]]

    @property
    def exact(self) -> bool:
        return self.lost == self.duplicated == self.unexpected == 0


@dataclass(frozen=True)
class CheckResult:
    tables: tuple[TableCheck, ...]

    @property
    def lost(self) -> int:
        return sum(t.lost for t in self.tables)

    @property
    def duplicated(self) -> int:
        return sum(t.duplicated for t in self.tables)

    @property
    def unexpected(self) -> int:
        return sum(t.unexpected for t in self.tables)

    @property
    def exact(self) -> bool:
        return all(t.exact for t in self.tables)

    def as_json(self) -> dict:
        return {"lost": self.lost, "duplicated": self.duplicated, "unexpected": self.unexpected,
                "tables": [{"table": t.table, "expected": t.expected, "found": t.found, "lost": t.lost,
                            "duplicated": t.duplicated, "unexpected": t.unexpected, "samples": t.samples}
                           for t in self.tables]}


def check_table(table: str, expected: Mapping[Hashable, Hashable], observed: Iterable[Hashable]) -> TableCheck:
    """Match the ``observed`` row keys of one table with the ``expected`` records (identity -> the row key it must
    produce). Records sharing a key (byte-identical re-sends) are expected that many times."""
    by_key: dict[Hashable, list[Hashable]] = defaultdict(list)
    for identity, key in expected.items():
        by_key[key].append(identity)
    found = Counter(observed)
    lost: list[Hashable] = []
    duplicated: list[Hashable] = []
    unexpected: list[Hashable] = []
    for key, identities in by_key.items():
        seen = found.get(key, 0)
        lost += sorted(identities)[seen:]
        duplicated += [key] * max(0, seen - len(identities))
    for key, seen in found.items():
        if key not in by_key:
            unexpected += [key] * seen
    samples = {name: [_short(item) for item in items[:SAMPLE]]
               for name, items in (("lost", lost), ("duplicated", duplicated), ("unexpected", unexpected)) if items}
    return TableCheck(table, len(expected), sum(found.values()), len(lost), len(duplicated), len(unexpected), samples)


def check(expected: Mapping[str, Mapping[Hashable, Hashable]],
          observed: Mapping[str, Iterable[Hashable]]) -> CheckResult:
    """Every table of ``expected`` against its rows in ``observed`` (a table missing there holds no rows)."""
    return CheckResult(tuple(check_table(table, want, observed.get(table, ())) for table, want in expected.items()))


def expectations(sent: Sequence[tuple[Manifest, Mapping[int, bytes]]], tables: TableNames) -> dict[str, dict]:
    """Per table: identity -> the row key it must appear as, from the manifests of every producer run into the topic.

    A record's identity is (run, sequence number), an event's its id (unique across runs: the generator derives ids
    from its seed and base time). Each manifest comes with the bytes of its records by sequence number (the manifest
    keeps labels, not bytes; :func:`record_values` regenerates them).
    """
    expected: dict[str, dict] = {name: {} for name in (tables.bronze, tables.dead_letters, tables.events,
                                                         tables.late_events, tables.duplicates)}
    for run, (manifest, values) in enumerate(sent):
        records = {r["seq"]: r for r in manifest.records}
        missing = sorted(set(records) - set(values))
        if missing:
            raise ValueError(f"no bytes for records {missing[:5]} of manifest {run}")
        resent = {seq: "duplicate" for seq in manifest.duplicates} | {c["seq"]: "conflict" for c in manifest.conflicts}
        expected[tables.bronze].update({(run, seq): values[seq] for seq in records})
        expected[tables.dead_letters].update({(run, seq): (values[seq], reason)
                                              for seq, reason in manifest.malformed.items()})
        expected[tables.events].update({event_id: (event_id, payload["amount_cents"]) for event_id, payload
                                        in (manifest.valid_events | manifest.late_events).items()})
        expected[tables.late_events].update({event_id: (event_id, payload["amount_cents"])
                                             for event_id, payload in manifest.late_events.items()})
        expected[tables.duplicates].update({(run, seq): (records[seq]["event_id"], kind)
                                            for seq, kind in resent.items()})
    return expected


def record_values(manifest: Manifest) -> dict[int, bytes]:
    """The bytes of every record the manifest lists, regenerated from its config (the generator is deterministic)."""
    sent = {r["seq"] for r in manifest.records}
    values = {}
    for record in generate(GeneratorConfig(**manifest.config)):
        if record.seq in sent:
            values[record.seq] = record.value
        if len(values) == len(sent):
            break
    return values


def summary_line(result: CheckResult) -> str:
    """The line a chaos run prints per scenario; all zeros is the only passing answer."""
    return f"lost={result.lost} duplicated={result.duplicated} unexpected={result.unexpected}"


def detail_lines(result: CheckResult) -> list[str]:
    lines = []
    for t in result.tables:
        line = (f"{t.table:24s} expected {t.expected:,} found {t.found:,}: lost={t.lost} duplicated={t.duplicated} "
                f"unexpected={t.unexpected}")
        lines.append(line + "".join(f"; {kind} e.g. {', '.join(items[:3])}" for kind, items in t.samples.items()))
    return lines


def _short(item: Hashable) -> str:
    text = repr(item)
    return text if len(text) <= 120 else text[:117] + "..."


# ---- I/O ------------------------------------------------------------------------------------------------------------


def observed_rows(spark, settings, tables: TableNames) -> dict[str, list[Hashable]]:
    """The row keys of each checked stream table, as :func:`expectations` names them."""
    from spark_apps.io.catalog import table_path

    def rows(table: str, *columns: str) -> list:
        frame = spark.read.format("delta").load(str(table_path(settings, table)))
        return [tuple(_plain(v) for v in row) for row in frame.select(*columns).collect()]

    return {
        tables.bronze: [value for (value,) in rows(tables.bronze, "value")],
        tables.dead_letters: rows(tables.dead_letters, "value", "reason"),
        tables.events: rows(tables.events, "event_id", "amount_cents"),
        tables.late_events: rows(tables.late_events, "event_id", "amount_cents"),
        tables.duplicates: rows(tables.duplicates, "event_id", "kind"),
    }


def check_tables(spark, settings, tables: TableNames, manifests: Sequence[Manifest]) -> CheckResult:
    """Check the stream tables of ``tables`` against the manifests of everything produced into their topic."""
    sent = [(manifest, record_values(manifest)) for manifest in manifests]
    return check(expectations(sent, tables), observed_rows(spark, settings, tables))


def _plain(value):
    return bytes(value) if isinstance(value, bytearray) else value
