"""The entry points: :func:`load_policy`, :func:`validate_policy`, :func:`analyze_policy`.

Each takes a path, YAML text or the file's bytes, runs the reader over it and
returns the policy, its errors, or both with the warnings.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TypeAlias

from .model import Policy, PolicyError, PolicyReport, PolicyValidationError
from .reader import PolicyReader
from .regex_checks import RegexChecker, basic_regex_check

PolicySource: TypeAlias = "str | bytes | os.PathLike[str]"


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
            err = PolicyError(display, 1, "-", f"cannot read the policy file: {reason}")
            return PolicyReport(None, (err,), ())
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        err = PolicyError(display, line, "-", "the policy file is not valid UTF-8")
        return PolicyReport(None, (err,), ())
    parser = PolicyReader(display, regex_checker or basic_regex_check)
    policy = parser.parse(text, raw, path)
    errors = tuple(sorted(parser.errors, key=_error_order))
    warnings = tuple(sorted(parser.warnings, key=_error_order))
    if errors:
        return PolicyReport(None, errors, warnings)
    assert policy is not None
    policy = dataclasses.replace(policy, warnings=warnings)
    return PolicyReport(policy, errors, warnings)


def _error_order(e: PolicyError) -> int:
    return e.line


def _looks_like_path(text: str) -> bool:
    if "\n" in text or not text.strip():
        return False
    if text.lower().endswith((".yaml", ".yml", ".json")):
        return True
    try:
        return os.path.isfile(text)
    except (OSError, ValueError):
        return False
