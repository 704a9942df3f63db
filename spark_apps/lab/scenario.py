"""What the chaos lab is asked to run and what each scenario came to: the data alone, so the lab that runs the
scenarios and the report that shows them both import it and neither the other."""

from __future__ import annotations

from dataclasses import dataclass

from spark_apps.core.errors import PlatformError

# Every scenario of the lab (``lab.chaos.SCENARIOS`` runs them), in the order a plan without a choice runs them.
SCENARIO_NAMES = ("kill_stream", "broker_restart", "zombie_writer", "concurrent_optimize", "disk_full",
                  "checkpoint_deleted")


@dataclass(frozen=True)
class ChaosPlan:
    kills: int = 20
    events: int = 1000
    seed: int = 7
    scenarios: tuple[str, ...] = ()
    # The pipeline put through the scenarios, by name or module:attribute (empty: the settings' pipeline); it must
    # declare a generator.
    pipeline: str = ""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.scenarios) - set(SCENARIO_NAMES))
        if unknown:
            raise PlatformError(f"unknown chaos scenario {', '.join(unknown)}; known: {', '.join(SCENARIO_NAMES)}")
        if not self.scenarios:
            object.__setattr__(self, "scenarios", SCENARIO_NAMES)


@dataclass
class ScenarioResult:
    """What one scenario did and whether the platform stayed exact; the JSON report holds these."""

    name: str
    passed: bool
    kills: int
    records: int
    launches: int
    duration_s: float
    reconciled: bool | None
    lost: int | None
    duplicated: int | None
    unexpected: int | None
    notes: list[str]
    kill_log: list[dict]
    check: dict | None
    error: str = ""

    def line(self) -> str:
        counts = ("checker not run" if self.lost is None else
                  f"lost={self.lost} duplicated={self.duplicated} unexpected={self.unexpected}")
        verdict = {True: "reconciled", False: "NOT reconciled", None: "reconcile not run"}[self.reconciled]
        failed = f": {self.error}" if self.error else ""
        return (f"{self.name:20s} {'PASS' if self.passed else 'FAIL'} kills {self.kills}, {self.records:,} records, "
                f"{verdict}, {counts}, {self.duration_s:.0f}s{failed}")
