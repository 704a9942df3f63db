"""A credential in the settings: printable, loggable and storable only as a mask.

Webhook URLs carry their token in the path, a PagerDuty routing key is the credential itself. Wrapping them
keeps them out of ``repr(settings)``, f-strings, tracebacks and error messages; only :meth:`Secret.reveal`
gives the value, at the one place that sends it.
"""

from __future__ import annotations

MASK = "**********"


class Secret:
    """A string that shows as a mask everywhere but :meth:`reveal`."""

    __slots__ = ("_value",)

    def __init__(self, value: str = "") -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __repr__(self) -> str:
        return f"Secret({MASK!r})" if self._value else "Secret('')"

    def __str__(self) -> str:
        return MASK if self._value else ""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)
