"""Kafka's own command-line tools, run against the platform's broker: what on-call knows from any Kafka.

The jars come with the broker's (``make jars`` fetches the ``kafka-tools`` artifact of the same version), so
``kappa kafka console-consumer --topic marketplace.events --from-beginning`` needs no separate download, and
the tools that talk to a broker get the platform's bootstrap servers unless told otherwise.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import PROJECT_ROOT, Settings
from spark_apps.services.broker import kafka_classpath
from spark_apps.services.processes import java_binary

LOG4J_CONFIG = PROJECT_ROOT / "infra" / "kafka" / "tools-log4j2.properties"
# Tool name (the shell script's name without kafka- and .sh) -> main class.
TOOLS = {
    "console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "configs": "kafka.admin.ConfigCommand",
    "consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "dump-log": "org.apache.kafka.tools.DumpLogSegments",
    "get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "topics": "org.apache.kafka.tools.TopicCommand",
}
# Tools that read files, not a broker.
OFFLINE_TOOLS = frozenset({"dump-log"})


def command(settings: Settings, tool: str, args: Sequence[str]) -> list[str]:
    """The java command line of ``tool`` with ``args``, pointed at the platform's brokers."""
    if tool not in TOOLS:
        raise PlatformError(f"unknown Kafka tool {tool!r}; one of {', '.join(sorted(TOOLS))}")
    classpath = kafka_classpath(settings.kafka_jars_dir)
    if not any(settings.kafka_jars_dir.glob("kafka-tools-*.jar")):
        raise PlatformError(f"Kafka's tools are missing in {settings.kafka_jars_dir}; run `make jars`")
    given = list(args)
    if tool not in OFFLINE_TOOLS and "--bootstrap-server" not in given:
        given = ["--bootstrap-server", settings.kafka_bootstrap_servers, *given]
    return [java_binary(), "-Xmx256m", "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
            "-cp", classpath, TOOLS[tool], *given]


def run(settings: Settings, tool: str, args: Sequence[str], timeout_s: float | None = None) -> int:
    """Run the tool in the foreground with this terminal's input and output; its exit code."""
    return subprocess.run(command(settings, tool, args), check=False, timeout=timeout_s).returncode
