"""`python -m bench.file_producer FILE TOPIC`: send a file of events as `kappa produce --file` does, in a process
of its own, and print what it took as one JSON line: records, seconds, records/s and the peak resident memory."""

from __future__ import annotations

import json
import resource
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
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"records": result.sent, "seconds": round(result.elapsed_s, 2),
                      "records_per_s": round(result.rate, 1), "peak_rss_mib": round(peak_kib / 1024, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
