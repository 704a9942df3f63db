"""Errors that end a command with one readable line instead of a traceback."""


class PlatformError(Exception):
    """A failure the user can act on; the CLI prints its message and exits non-zero."""


class SettingsError(PlatformError):
    """A setting is missing or has a value that cannot be used."""


class BrokerError(PlatformError):
    """The embedded Kafka broker could not be started, reached or stopped."""


class TopicConfigError(PlatformError):
    """A topic exists with a configuration that would make replay inexact."""
