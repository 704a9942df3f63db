"""A fault-injection hook for recovery tests: stop the job at a named point of a micro-batch.

``KAPPA_FAULT_INJECT=after_write@2`` raises inside batch 2 right after its one commit to the store
(the query fails, as after a crash, with nothing in Spark's commit log); ``after_write@2:kill`` ends
the process with SIGKILL at that point, as ``kill -9`` would; ``after_parse@2:enospc`` fails before
the write as a full disk does (``OSError`` ENOSPC), for the chaos suite's disk-full scenario.
"""

from __future__ import annotations

import errno
import os
import signal

from spark_apps.core.errors import SettingsError

STAGES = ("after_parse", "after_write", "before_checkpoint_commit")
ACTIONS = ("raise", "kill", "enospc")


class InjectedFault(RuntimeError):
    """Raised by the hook; never caught by the engine."""


class FaultPlan:
    """Parsed ``fault_inject`` setting."""

    def __init__(self, spec: str) -> None:
        self.stage = self.batch_id = self.action = None
        if not spec:
            return
        where, _, action = spec.partition(":")
        stage, _, batch = where.partition("@")
        if stage not in STAGES or not batch.isdigit() or action not in ("", *ACTIONS):
            raise SettingsError(f"KAPPA_FAULT_INJECT must be <stage>@<batch>[:{'|'.join(ACTIONS)}] with stage in "
                                f"{', '.join(STAGES)}; got {spec!r}")
        self.stage, self.batch_id, self.action = stage, int(batch), action or "raise"

    def reached(self, stage: str, batch_id: int) -> None:
        if stage != self.stage or batch_id != self.batch_id:
            return
        if self.action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.action == "enospc":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), f"injected {stage} in batch {batch_id}")
        raise InjectedFault(f"injected fault {stage} in batch {batch_id}")
