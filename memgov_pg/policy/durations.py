"""Durations (``30 days``) and time values (``now() - 30 days``) of the policy language.

A :class:`Duration` is a validated positive integer of a fixed unit, so its
``str()`` is safe as the text of an SQL interval literal.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

_UNIT_SECONDS: Final[Mapping[str, int]] = MappingProxyType(
    {"minutes": 60, "hours": 3600, "days": 86400, "weeks": 604800}
)
#: The longest duration accepted anywhere (100 years): keeps ``now() - d``
#: far inside PostgreSQL's timestamptz range.
MAX_DURATION_SECONDS: Final = 36525 * 86400
#: The units of a duration, plural; the singular is accepted too.
DURATION_UNITS: Final[tuple[str, ...]] = tuple(_UNIT_SECONDS)
_DURATION_RE: Final = re.compile(
    r"\s*(\d+)\s*(" + "|".join(u.removesuffix("s") for u in DURATION_UNITS) + r")s?\s*", re.IGNORECASE
)
RELATIVE_RE: Final = re.compile(r"\s*now\s*\(\s*\)\s*-\s*(.*?)\s*", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Duration:
    """A validated positive duration: ``amount`` whole ``unit``s.

    ``str(d)`` (e.g. ``"30 days"``) is built from an int and a fixed unit name,
    so it is safe to use as the text of an SQL interval literal.
    """

    amount: int
    unit: Literal["minutes", "hours", "days", "weeks"]

    @property
    def seconds(self) -> int:
        """The duration in seconds."""
        return self.amount * _UNIT_SECONDS[self.unit]

    def __str__(self) -> str:
        return f"{self.amount} {self.unit}"


@dataclass(frozen=True)
class RelativeTime:
    """The instant ``now() - ago``; ``text`` is what the policy file said."""

    ago: Duration
    text: str

    @property
    def seconds(self) -> int:
        """How far back the instant is, in seconds."""
        return self.ago.seconds

    def __str__(self) -> str:
        return f"now() - {self.ago}"


def parse_duration(text: str) -> Duration:
    """Parse ``"N minutes|hours|days|weeks"`` (singular too, any spacing and case).

    Raises ``ValueError`` with a user-facing message.
    """
    m = _DURATION_RE.fullmatch(text)
    if m is None:
        raise ValueError(f"invalid duration {text!r}: expected 'N minutes', 'N hours', 'N days' or 'N weeks'")
    amount = int(m.group(1))
    unit = m.group(2).lower() + "s"
    if amount <= 0:
        raise ValueError(f"invalid duration {text!r}: must be positive")
    duration = Duration(amount, unit)  # type: ignore[arg-type]
    if duration.seconds > MAX_DURATION_SECONDS:
        raise ValueError(f"invalid duration {text!r}: longer than 100 years")
    return duration


def parse_time_value(text: str) -> RelativeTime:
    """Parse ``"now() - N units"``. Raises ``ValueError`` with a user-facing message."""
    m = RELATIVE_RE.fullmatch(text)
    if m is None:
        raise ValueError(f'invalid time value {text!r}: expected "now() - N minutes|hours|days|weeks"')
    try:
        return RelativeTime(parse_duration(m.group(1)), text)
    except ValueError as exc:
        raise ValueError(f"invalid time value {text!r}: {_after_colon(str(exc))}") from None


def _after_colon(message: str) -> str:
    return message.split(": ", 1)[1] if ": " in message else message
