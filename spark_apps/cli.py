"""``kappa``: the command line of the platform.

Every failure the user can act on ends as one line on stderr and a non-zero exit code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from spark_apps.errors import PlatformError
from spark_apps.settings import Settings

EXIT_USAGE = 2
EXIT_FAILED = 1


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line plus a hint, not the whole usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def _broker(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.broker import EmbeddedBroker

    broker = EmbeddedBroker(settings)
    if args.action == "start":
        broker.start()
        print(f"kafka broker running on {broker.bootstrap_servers} (pid {broker.pid()}, "
              f"data {broker.paths.data_dir}, logs {broker.paths.log_dir})")
    elif args.action == "stop":
        print("kafka broker stopped" if broker.stop() else "kafka broker was not running")
    else:
        pid = broker.pid()
        print(f"kafka broker running on {broker.bootstrap_servers} (pid {pid})" if pid
              else "kafka broker is not running")
        return 0 if pid else EXIT_FAILED
    return 0


def _topic(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.topics import ensure_topic, partition_offsets

    state = ensure_topic(settings, args.name, args.partitions)
    verb = "created" if state.created else "exists, config checked"
    offsets = partition_offsets(settings, state.name)
    spans = ", ".join(f"p{p}=[{lo},{hi})" for p, (lo, hi) in offsets.items())
    print(f"topic {state.name}: {verb}; {state.partitions} partitions; {spans}")
    return 0


def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.demo import run_demo

    return run_demo(settings)


def _schema(args: argparse.Namespace, settings: Settings) -> int:
    from spark_apps.marketplace.events import VALIDATION_ORDER_DOC, markdown_table

    print(markdown_table())
    print()
    print(VALIDATION_ORDER_DOC)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kappa", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    broker = commands.add_parser("broker", help="start, stop or check the embedded Kafka broker")
    broker.add_argument("action", choices=("start", "stop", "status"))
    broker.set_defaults(handler=_broker)

    topic = commands.add_parser("topic", help="create the events topic (or check an existing one)")
    topic.add_argument("--name", help="topic name (default: settings events_topic)")
    topic.add_argument("--partitions", type=_positive_int, help="partitions for a new topic")
    topic.set_defaults(handler=_topic)

    demo = commands.add_parser("demo", help="run the end-to-end demo on the embedded setup")
    demo.set_defaults(handler=_demo)

    schema = commands.add_parser("schema", help="print the event schema and validation order")
    schema.set_defaults(handler=_schema)
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace, Settings], int] = args.handler
    try:
        return handler(args, Settings.from_env())
    except PlatformError as exc:
        print(f"kappa {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"kappa {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
