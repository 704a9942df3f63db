"""Errors that end a command with one readable line instead of a traceback."""


class PlatformError(Exception):
    """A failure the user can act on; the CLI prints its message and exits non-zero."""


class SettingsError(PlatformError):
    """A setting is missing or has a value that cannot be used."""


class BrokerError(PlatformError):
    """The embedded Kafka broker could not be started, reached or stopped."""


class TopicConfigError(PlatformError):
    """A topic exists with a configuration that would make replay inexact."""


def first_line(exc: BaseException) -> str:
    """An exception in one line for a log or a ledger: its message's first line, or its class's name when it has
    no message (a Spark error's message goes on with a JVM stack trace)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
