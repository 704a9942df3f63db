"""What one audit run found: per stream table its verdict, the record-count contract, and the run as a whole. The
data alone, so the auditor that computes it and the report that shows it both import it and neither the other."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

from spark_apps.audit import ledger
from spark_apps.audit.diff import TableDiff
from spark_apps.audit.expectations import SuiteOutcome
from spark_apps.audit.recompute import Snapshot, StreamTable
from spark_apps.core.version import same_code
from spark_apps.io.lineage import StreamPosition


@dataclass(frozen=True)
class ContractCheck:
    """One equation of the record-count contract, e.g. bronze = candidates + dead letters."""

    name: str
    left: int
    right: int

    @property
    def ok(self) -> bool:
        return self.left == self.right


@dataclass
class TableVerdict:
    table: StreamTable
    version: int
    snapshot_version: int
    diff: TableDiff
    gx: SuiteOutcome
    not_compared: str = ""  # why an incremental run compared no row of the table

    @property
    def stream_equals_batch(self) -> bool:
        return self.diff.exact and self.gx.stream_equals_batch

    @property
    def success(self) -> bool:
        return self.stream_equals_batch and self.gx.quality_ok


@dataclass
class AuditRun:
    run_id: str
    pipeline: str
    position: StreamPosition
    snapshot: Snapshot
    started_at: dt.datetime
    verdicts: list[TableVerdict] = field(default_factory=list)
    contract: list[ContractCheck] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    docs_url: str = ""
    report_path: Path | None = None
    as_of: dt.datetime | None = None  # the moment a scheduled run stands for (its data interval's end)
    kind: str = ledger.FULL
    builds_on: str = ""  # the verified run an incremental run extended
    kind_reason: str = ""

    @property
    def success(self) -> bool:
        return all(v.success for v in self.verdicts) and all(c.ok for c in self.contract)

    @property
    def code_note(self) -> str:
        """What on-call must know about the code first: "" when the stream's batch and this batch ran the same code
        (or the stream's commit predates recorded versions), else which code each side ran."""
        stream, batch = self.position.code_version, self.snapshot.code_version
        if not stream or same_code(stream, batch):
            return ""
        return (f"the stream ran code {stream} for batch {self.position.batch_id}, this batch ran {batch}: a "
                "difference may be the code, not the data")
