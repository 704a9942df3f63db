"""docs/pipelines.md's walk-through, followed literally: the file it shows is written as shown, every command
block is run as shown, in a folder of the user's own, with `kappa` on the PATH the way the virtualenv puts it, and
every output and module it shows is what the commands give.

The test adds only what the walk-through's prose asks of the reader once (a running broker, the virtualenv
active) and the session's settings, so that nothing touches the developer's own broker or warehouse.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest

from spark_apps.core.settings import PROJECT_ROOT
from tests.support.pages import drawn, plots
from tests.support.topics import delete_topics, list_topics

pytestmark = pytest.mark.integration

DOC = PROJECT_ROOT / "docs" / "pipelines.md"
SECTION = "## Your own data in five minutes"
WALKTHROUGH_TOPIC = "readings"
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Block:
    language: str
    file: str | None
    generated: str | None
    text: str


def walkthrough() -> str:
    text = DOC.read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return text[start:end]


def blocks(section: str) -> list[Block]:
    found = []
    for language, info, body in FENCE.findall(section):
        named = re.search(r"\bfile=(\S+)", info)
        generated = re.search(r"\bgenerated=(\S+)", info)
        found.append(Block(language, named.group(1) if named else None,
                           generated.group(1) if generated else None, body))
    return found


def documented_gold(section: str) -> list[tuple]:
    """The rows of the gold table the walk-through shows, typed like Spark returns them."""
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| boiler-")]
    return sorted((device.strip(), day.strip(), int(readings), Decimal(low), Decimal(high), Decimal(total))
                  for device, day, readings, low, high, total in rows)


def test_the_walkthrough_drafts_the_pipeline_from_the_file_and_ends_reconciled():
    found = blocks(walkthrough())
    assert [b.file for b in found if b.file] == ["readings.csv"]
    assert [b.generated for b in found if b.generated] == ["readings.py"]
    commands = [line for b in found if b.language == "bash" for line in b.text.splitlines()]
    assert commands[0].startswith("kappa init readings --from readings.csv")
    assert [c.split()[1] for c in commands[-3:]] == ["stream", "reconcile", "status"]
    assert any(line.startswith(f"kappa topic --name {WALKTHROUGH_TOPIC} ") for line in commands), \
        "the test deletes the topic the reader creates"


# What a command's console must not show: a Python traceback, a Java stack frame or uncaught exception, a log line
# of Spark's (they go to <home>/logs/spark.log), a JVM warning.
NOISE = re.compile(r"^(Traceback|\s+at [\w$.]+\(|Exception in thread|WARNING: "
                   r"|\d\d/\d\d/\d\d \d\d:\d\d:\d\d (WARN|ERROR) )", re.MULTILINE)


def noise(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if NOISE.match(line)]


def timeless(output: str) -> str:
    """A command's output without what varies from run to run: seconds and rates."""
    return re.sub(r"in [\d.]+s \([\d,]+ records/s", "in Ns (N records/s", output)


def test_following_the_walkthrough_literally_reconciles_a_users_csv_exactly(
        spark, kafka_broker, settings, isolated_home, tmp_path):
    section = walkthrough()
    folder = tmp_path / "my-project"
    folder.mkdir()
    local = isolated_home.with_overrides(events_topic="walkthrough.unused")
    env = {**os.environ, **local.as_env(), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("KAPPA_PIPELINE", None)
    outputs = []
    try:
        for block in blocks(section):
            if block.file:
                (folder / block.file).write_text(block.text)
                continue
            if block.generated:
                assert (folder / block.generated).read_text() == block.text, "the module shown is the one written"
                continue
            if block.language == "text":
                assert timeless(block.text.strip()) in timeless(outputs[-1]), "the output shown is the output"
                continue
            assert block.language == "bash", f"a block the test cannot follow: {block.language}"
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.text], cwd=folder, env=env,
                                  capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, f"{block.text}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}"
            outputs.append(done.stdout)
            assert not noise(done.stderr), f"{block.text}: the console holds what the platform handles:\n{done.stderr}"
    finally:
        if WALKTHROUGH_TOPIC in list_topics(local):
            delete_topics(local, [WALKTHROUGH_TOPIC])

    reconciled = outputs[-2]
    verdicts = [line for line in reconciled.splitlines() if " MATCH" in line or "MISMATCH" in line]
    assert verdicts and not any("MISMATCH" in line for line in verdicts), reconciled
    assert any("gold.readings_device_daily" in line for line in verdicts), reconciled
    overview = Path(next(line for line in reconciled.splitlines() if line.startswith("overview: ")).split(": ", 1)[1])
    shown = plots(overview, local.browser)
    assert shown.errors == [], shown.errors
    assert {"verdicts", "rows", "audits", "latency", "lag", "serving"} <= drawn(shown), shown.probe
    assert "readings" in outputs[-1], outputs[-1]

    gold = spark.table("gold.readings_device_daily")
    rows = sorted((r.device_id, r.day.isoformat(), r.readings, r.min_celsius, r.max_celsius, r.sum_celsius)
                  for r in gold.collect())
    assert rows == documented_gold(section)
    dead = spark.table("stream.readings_dead_letters").collect()
    assert [(bytes(d.value).decode().count("r-0008"), d.reason) for d in dead] == [(1, "wrong_type:celsius")]
    duplicates = spark.table("silver.readings_duplicates").collect()
    assert [d.reading_id for d in duplicates] == ["r-0005"]
