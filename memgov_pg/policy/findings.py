"""The findings of the policy checks: each error and warning, with its stable code.

Every finding names the file, the line, the rule (``-`` outside a rule), a code
(``MGP`` and three digits) and a message. A code names one kind of finding and never
changes its meaning; docs/policy.md lists each one once ("Finding codes"), and
tests/unit/test_finding_codes.py holds the code, the docs and the severities together.
Codes are raised as literals, each at exactly one place: the reader's ``error`` /
``warn`` (memgov_pg.policy.reader_nodes) or :func:`error` / :func:`warning` here, which
the passes over the model use.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from ..errors import MemgovError

#: What a finding code looks like.
CODE_RE: Final = re.compile(r"MGP\d{3}")
_CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f]")

Severity = Literal["error", "warning"]


def one_line(text: str) -> str:
    """Messages quote user text: keep each finding on one line."""
    return _CONTROL_RE.sub(lambda m: repr(m.group())[1:-1], text)


@dataclass(frozen=True)
class PolicyError:
    """One finding. ``str()`` is ``file:line: rule-id: CODE message``.

    ``rule_id`` is ``-`` outside a rule, and ``rules[N]`` (0-based) for a rule
    whose id is missing or invalid. Warnings have ``severity == "warning"`` and
    print as ``file:line: rule-id: warning: CODE message``. ``code`` is the
    finding's stable code (docs/policy.md, "Finding codes").
    """

    file: str
    line: int
    rule_id: str
    message: str
    severity: Severity = "error"
    code: str = dataclasses.field(default="", kw_only=True)

    def __str__(self) -> str:
        prefix = "warning: " if self.severity == "warning" else ""
        code = f"{self.code} " if self.code else ""
        return f"{self.file}:{self.line}: {self.rule_id}: {prefix}{code}{self.message}"

    def as_json(self) -> dict[str, Any]:
        """The finding in ``memgov validate --json`` (``findings``)."""
        return {
            "file": self.file,
            "line": self.line,
            "rule_id": self.rule_id,
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
        }


def error(file: str, line: int, rule_id: str, code: str, message: str) -> PolicyError:
    """An error finding (the text of ``rule_id`` and ``message`` kept on one line)."""
    return PolicyError(file, line, one_line(rule_id), one_line(message), "error", code=code)


def warning(file: str, line: int, rule_id: str, code: str, message: str) -> PolicyError:
    """A warning finding (the text of ``rule_id`` and ``message`` kept on one line)."""
    return PolicyError(file, line, one_line(rule_id), one_line(message), "warning", code=code)


def in_file_order(findings: Sequence[PolicyError]) -> tuple[PolicyError, ...]:
    """The findings by line; findings on one line keep the order they were found in."""
    return tuple(sorted(findings, key=lambda f: f.line))


class PolicyValidationError(MemgovError, ValueError):
    """A policy file has errors; ``.errors`` lists all of them (file order)."""

    def __init__(self, errors: Sequence[PolicyError]) -> None:
        self.errors: tuple[PolicyError, ...] = tuple(errors)
        super().__init__("\n".join(str(e) for e in self.errors))

    # the error names file, line and rule id (of the first error).
    @property
    def file(self) -> str | None:
        """The file of the first error, or None."""
        return self.errors[0].file if self.errors else None

    @property
    def line(self) -> int | None:
        """The line of the first error, or None."""
        return self.errors[0].line if self.errors else None

    @property
    def rule_id(self) -> str | None:
        """The rule id of the first error (``-`` outside a rule), or None."""
        return self.errors[0].rule_id if self.errors else None
