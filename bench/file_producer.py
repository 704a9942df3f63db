"""`python -m bench.file_producer FILE TOPIC`: send a file of events as `kappa produce --file` does, in a process
of its own, and print what it took as one JSON line: records, seconds, records/s and the peak resident memory."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from spark_apps.core.settings import Settings
from spark_apps.io.event_files import event_files, read_records
from spark_apps.io.producer import produce_file
from spark_apps.target.resolution import declared


def main(argv: list[str]) -> int:
    path, topic = Path(argv[0]), argv[1]
    settings = Settings.from_env()
    schema = declared(settings).pipeline.schema
    result = produce_file(settings, topic, read_records(event_files(path), schema), str(path), show_progress=False)
    print(json.dumps({"records": result.sent, "seconds": round(result.elapsed_s, 2),
                      "records_per_s": round(result.rate, 1), "peak_rss_mib": round(peak_resident_kib() / 1024, 1)}))
    return 0


def peak_resident_kib() -> int:
    """This process's own peak resident memory (``VmHWM``). Not ``getrusage``'s ``ru_maxrss``: Linux carries the
    peak of the process image an ``exec`` replaces into it, so a child of the bench reported the bench's own peak
    (449 MiB) instead of its 96."""
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
