"""The findings of `memgov doctor` and its report: severities, one line each, the summary and the JSON."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Final

import psycopg

from ..resources import query

ERROR: Final = "error"
WARNING: Final = "warning"
INFO: Final = "info"
SEVERITIES: Final = (ERROR, WARNING, INFO)
_SHOWN_ROLES: Final = 5


@dataclass(frozen=True)
class Finding:
    """One thing to fix (or, for info, to know)."""

    check: str  # a stable id: replication-role, owner, private-execute, ...
    severity: str  # error, warning, info
    subject: str  # the role or object it is about
    message: str  # what is wrong, one line
    fix: str  # what to do next

    def __str__(self) -> str:
        return one_line(f"{self.severity}: [{self.check}] {self.message}; fix: {self.fix}")


@dataclass(frozen=True)
class Report:
    """What ``memgov doctor`` found in one database (as ``user``): every finding, in order."""

    database: str
    user: str
    findings: tuple[Finding, ...]

    def count(self, severity: str) -> int:
        """How many findings have ``severity`` (``error``, ``warning`` or ``info``)."""
        return sum(1 for f in self.findings if f.severity == severity)

    def failed(self, fail_on: str = WARNING) -> bool:
        """Whether the exit status is 1: any error, or (default) any error or warning."""
        failing = {ERROR} if fail_on == ERROR else {ERROR, WARNING}
        return any(f.severity in failing for f in self.findings)

    def summary(self) -> str:
        """The closing line of ``memgov doctor``: clean, or how many errors, warnings and notes."""
        counts = {s: self.count(s) for s in SEVERITIES}
        if not counts[ERROR] and not counts[WARNING]:
            notes = f" ({plural(counts[INFO], 'note')})" if counts[INFO] else ""
            return f"memgov doctor: database {self.database} is clean{notes}"
        parts = [plural(counts[ERROR], "error"), plural(counts[WARNING], "warning")]
        if counts[INFO]:
            parts.append(plural(counts[INFO], "note"))
        return f"memgov doctor: database {self.database}: {', '.join(parts)}"

    def to_json(self, fail_on: str = WARNING) -> dict[str, Any]:
        """The report as ``memgov doctor --json`` prints it; ``ok`` is the opposite of :meth:`failed`."""
        return {
            "database": self.database,
            "user": self.user,
            "ok": not self.failed(fail_on),
            "errors": self.count(ERROR),
            "warnings": self.count(WARNING),
            "notes": self.count(INFO),
            "findings": [asdict(f) for f in self.findings],
        }


def plural(n: int, word: str) -> str:
    """``1 error``, ``2 errors``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def one_line(text: str) -> str:
    """Role and object names may hold anything; a finding stays one printable line."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def role_list(names: Iterable[str]) -> str:
    """The first few names, and how many more."""
    names = list(names)
    shown = ", ".join(names[:_SHOWN_ROLES])
    return shown + (f" and {len(names) - _SHOWN_ROLES} more" if len(names) > _SHOWN_ROLES else "")


def fetch_rows(conn: psycopg.Connection[Any], name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The rows of a named query (sql/queries/) as dicts."""
    cur = conn.execute(query(name), params)
    columns = [c.name for c in cur.description or ()]
    return [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]


# -- the checks --------------------------------------------------------------------------
