"""What a pipeline's own generator declares: synthetic records, each labelled with what it must become.

A pipeline may declare a generator (``Pipeline.generator``): a deterministic function from a
:class:`GeneratorRequest` to :class:`GeneratedRecord` records. Each record carries its Kafka key and value and its
*kind* (valid, late, duplicate, conflict, malformed) with what that implies (its event id, the dead-letter reason
a malformed one must get). :class:`Manifest` collects those labels into the ground truth of a run: what
silver, ``late_events``, ``duplicates`` and ``dead_letters`` must hold, without looking at anything the
platform produced. ``kappa produce`` sends a generator's records and writes the manifest; the chaos lab's
exactly-once checker compares the stream tables with it.

The engine asks for little: how many records, a seed, an event-time origin, a pace, the platform's allowed
lateness, and whether to be generous with every hard case (the chaos lab); the pipeline decides what its events
look like. Same request, same records, byte for byte: the checker regenerates the bytes from the request kept in
the manifest.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any, NamedTuple

KINDS: tuple[str, ...] = ("valid", "late", "duplicate", "conflict", "malformed")


@dataclass(frozen=True)
class GeneratorRequest:
    """What the engine asks a pipeline's generator for; equal requests must give equal records.

    ``events_per_second`` is the pace of the simulated clock (``None``: the generator's own default);
    ``hard_cases`` asks for plenty of every hard case (late, duplicate, conflicting, malformed, out of order)
    among a small population, as the chaos lab and the stream tests want.
    """

    seed: int = 42
    events: int = 10_000
    base_time_ms: int = 1_767_225_600_000
    events_per_second: float | None = None
    allowed_lateness_s: int = 900
    hard_cases: bool = False


class GeneratedRecord(NamedTuple):
    """One Kafka record and what it is meant to be.

    A tuple, as immutable as a frozen dataclass, because a generator makes one per record sent: the frozen
    dataclass set each field through ``object.__setattr__`` and took three times as long to build, about a sixth
    of the marketplace generator's time."""

    seq: int
    key: bytes | None
    value: bytes
    kind: str
    event_id: str | None
    expected_reason: str | None



@dataclass
class Manifest:
    """The ground truth of a generated stream: what silver, late_events and dead_letters must hold."""

    config: dict[str, Any]
    total_records: int
    counts_by_kind: dict[str, int]
    valid_events: dict[str, dict[str, Any]]
    late_events: dict[str, dict[str, Any]]
    duplicates: list[int]
    conflicts: list[dict[str, Any]]
    malformed: dict[int, str]
    records: list[dict[str, Any]]

    @classmethod
    def from_records(cls, config: Any, records: Iterable[GeneratedRecord]) -> Manifest:
        """Collect the labels, checking each against the bytes so a mislabelled record cannot hide."""
        builder = _ManifestBuilder()
        for record in records:
            builder.add(record)
        return builder.build(asdict(config) if is_dataclass(config) else dict(config))

    def to_json(self, path: str | Path) -> None:
        """Deterministic JSON (sorted keys); shallow on purpose, asdict would deep-copy every event."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        Path(path).write_text(json.dumps(data, sort_keys=True, separators=(",", ":")))

    @classmethod
    def from_json(cls, path: str | Path) -> Manifest:
        data = json.loads(Path(path).read_text())
        data["malformed"] = {int(seq): reason for seq, reason in data["malformed"].items()}
        return cls(**data)


class _ManifestBuilder:
    """Accumulates a manifest; remembers a hash of each first value to verify re-send labels."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(KINDS, 0)
        self.valid: dict[str, dict[str, Any]] = {}
        self.late: dict[str, dict[str, Any]] = {}
        self.duplicates: list[int] = []
        self.conflicts: list[dict[str, Any]] = []
        self.malformed: dict[int, str] = {}
        self.records: list[dict[str, Any]] = []
        self.first_value_hash: dict[str, int] = {}
        self.malformed_ids: set[str] = set()

    def add(self, record: GeneratedRecord) -> None:
        kind, event_id, seq = record.kind, record.event_id, record.seq
        if kind not in self.counts:
            raise ValueError(f"record {seq}: unknown kind {kind!r}")
        self.counts[kind] += 1
        self.records.append({"seq": seq, "kind": kind, "event_id": event_id,
                             "expected_reason": record.expected_reason,
                             "key": record.key.decode() if record.key is not None else None})
        if kind == "malformed":
            self._expect(record.expected_reason is not None, record, "has no expected reason")
            self.malformed[seq] = record.expected_reason
            if event_id is not None:
                self.malformed_ids.add(event_id)
        elif kind in ("valid", "late"):
            self._expect(event_id not in self.first_value_hash, record, "reuses an event id")
            self.first_value_hash[event_id] = hash(record.value)
            (self.valid if kind == "valid" else self.late)[event_id] = json.loads(record.value)
        else:
            self._expect(event_id in self.valid, record, "re-sends no earlier on-time valid event")
            identical = self.first_value_hash[event_id] == hash(record.value)
            self._expect(identical == (kind == "duplicate"), record, "bytes contradict its kind")
            if kind == "duplicate":
                self.duplicates.append(seq)
            else:
                self.conflicts.append({"seq": seq, "event_id": event_id})

    @staticmethod
    def _expect(ok: bool, record: GeneratedRecord, problem: str) -> None:
        if not ok:
            raise ValueError(f"record {record.seq} ({record.kind}, event {record.event_id}) {problem}")

    def build(self, config: dict[str, Any]) -> Manifest:
        reused = self.malformed_ids & self.first_value_hash.keys()
        if reused:
            raise ValueError(f"malformed records reuse valid event ids: {sorted(reused)[:5]}")
        return Manifest(config=config, total_records=len(self.records), counts_by_kind=self.counts,
                        valid_events=self.valid, late_events=self.late, duplicates=self.duplicates,
                        conflicts=self.conflicts, malformed=self.malformed, records=self.records)


EventGenerator = Callable[[GeneratorRequest], Iterator[GeneratedRecord]]
"""A pipeline's generator: the records of a request, in emission order."""


def manifest_of(request: GeneratorRequest, records: Iterable[GeneratedRecord]) -> Manifest:
    """The manifest of the records a generator produced for ``request`` (kept with it, to regenerate them)."""
    return Manifest.from_records(request, records)


def request_of(manifest: Manifest) -> GeneratorRequest:
    """The request a manifest written by :func:`manifest_of` was generated from."""
    return GeneratorRequest(**manifest.config)
