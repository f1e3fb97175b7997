"""The entry points: :func:`load_policy`, :func:`validate_policy`, :func:`analyze_policy`.

Each takes a path, YAML text or the file's bytes and runs the pipeline over it:
read (:mod:`.reader`: the typed model, with the errors of each value), then each
pass of :data:`PASSES` over the rules read (the lints and the satisfiability check),
and returns the policy, its errors, or both with the warnings. The other passes
over a finished policy, :func:`~memgov_pg.policy.coverage.coverage` and
:func:`~memgov_pg.policy.overrides.compare_override`, are ``memgov validate``'s.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, TypeAlias

from .findings import PolicyError, PolicyValidationError, error, in_file_order
from .lints import auto_delete_lints, order_lints
from .model import Policy, PolicyReport, Rule
from .reader import read_policy
from .reader_nodes import Reading
from .regex_checks import RegexChecker, basic_regex_check
from .satisfiable import satisfiability

PolicySource: TypeAlias = "str | bytes | os.PathLike[str]"
#: A pass: the rules read (evaluation order) and the file's name -> its findings.
Pass: TypeAlias = Callable[[Sequence[Rule], str], list[PolicyError]]
#: The passes every policy goes through after it is read, in this order.
PASSES: Final[tuple[Pass, ...]] = (auto_delete_lints, satisfiability, order_lints)


def load_policy(
    source: PolicySource,
    *,
    filename: str | None = None,
    regex_checker: RegexChecker | None = None,
) -> Policy:
    """Load and validate a policy; raise :class:`PolicyValidationError` with
    every error of the file.

    ``source`` is a path (``os.PathLike``, or a ``str`` without a newline that
    ends in ``.yaml``/``.yml``/``.json`` or names an existing file), YAML text
    (any other ``str``), or the file's bytes. ``filename`` is what error lines
    show (default: the path, or ``<string>``). ``regex_checker`` validates each
    ``regex`` pattern (the compiler passes one that asks PostgreSQL); without
    it, :func:`basic_regex_check` is used.
    """
    report = analyze_policy(source, filename=filename, regex_checker=regex_checker)
    if report.policy is None:
        raise PolicyValidationError(report.errors)
    return report.policy


def validate_policy(
    source: PolicySource,
    *,
    filename: str | None = None,
    regex_checker: RegexChecker | None = None,
) -> list[PolicyError]:
    """Every error of the policy (empty when valid); warnings are not included."""
    return list(analyze_policy(source, filename=filename, regex_checker=regex_checker).errors)


def analyze_policy(
    source: PolicySource,
    *,
    filename: str | None = None,
    regex_checker: RegexChecker | None = None,
) -> PolicyReport:
    """Parse and validate; return the policy (or None), all errors and all warnings."""
    path: Path | None = None
    if isinstance(source, bytes):
        raw = source
        display = filename or "<string>"
    elif isinstance(source, str) and not _looks_like_path(source):
        raw = source.encode("utf-8")
        display = filename or "<string>"
    else:
        path = Path(source)
        display = filename or str(source)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            reason = exc.strerror or str(exc)
            return PolicyReport(None, (error(display, 1, "-", "MGP001", f"cannot read the policy file: {reason}"),), ())
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        return PolicyReport(None, (error(display, line, "-", "MGP002", "the policy file is not valid UTF-8"),), ())
    reading = Reading(display, regex_checker or basic_regex_check)
    read = read_policy(reading, text, raw, path)
    found = [finding for check in PASSES for finding in check(read.rules, display)]
    errors = in_file_order(reading.errors + [f for f in found if f.severity == "error"])
    warnings = in_file_order(reading.warnings + [f for f in found if f.severity == "warning"])
    if errors or read.policy is None:
        return PolicyReport(None, errors, warnings)
    return PolicyReport(dataclasses.replace(read.policy, warnings=warnings), errors, warnings)


def _looks_like_path(text: str) -> bool:
    if "\n" in text or not text.strip():
        return False
    if text.lower().endswith((".yaml", ".yml", ".json")):
        return True
    try:
        return os.path.isfile(text)
    except (OSError, ValueError):
        return False
