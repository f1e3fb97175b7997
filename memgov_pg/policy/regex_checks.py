"""Checks of the ``regex`` patterns of a policy, before PostgreSQL sees them.

Patterns run on every governed write: :func:`regex_cost_problem` refuses the
ones that could make a write slow, :func:`basic_regex_check` the structural
mistakes that both Python's ``re`` and PostgreSQL reject. PostgreSQL has the
last word when a policy is compiled against a database (a ``RegexChecker``
that asks it).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final, TypeAlias

#: ``regex_checker(pattern)`` returns None when the pattern is valid, else the
#: reason (e.g. PostgreSQL's error message).
RegexChecker: TypeAlias = Callable[[str], "str | None"]


# Python's ``re`` and PostgreSQL's ARE flavour differ (``\y``, ``(?P<n>)``, ...),
# so offline only structural mistakes that both flavours reject are reported.
_STRUCTURAL_REGEX_ERRORS: Final = (
    "missing ), unterminated subpattern",
    "unbalanced parenthesis",
    "unterminated character set",
    "nothing to repeat",
    "multiple repeat",
    "min repeat greater than max repeat",
    "bad character range",
)


#: The longest regex a policy may hold: patterns run on every governed write.
MAX_REGEX_LENGTH: Final = 512
#: How long PostgreSQL may take to compile a policy's pattern when the policy is checked
#: against a database. Every session compiles a pattern again on its first decision (and
#: on every one once more than 32 patterns are in use): a pattern whose bounded
#: repetitions make that slow (``([a-m]*[n-z]*){1,255}#`` took 15 s) is refused.
MAX_REGEX_COMPILE_MS: Final = 500


def regex_compile_problem() -> str:
    """The reason given for a pattern PostgreSQL did not compile within :data:`MAX_REGEX_COMPILE_MS`."""
    return (
        f"PostgreSQL takes more than {MAX_REGEX_COMPILE_MS} ms to compile it, and every session would pay that "
        "on its first decision: repeat groups fewer times (a {m,n} copies its group n times)"
    )


def regex_cost_problem(pattern: str) -> str | None:
    """Why a pattern could make a write slow, or None.

    PostgreSQL matches a pattern without backreferences in time linear in the
    text; a backreference (``\\1`` .. ``\\9`` outside a bracket expression) makes
    it backtrack, exponentially in the worst case (``(.+)\\1\\1x`` took a minute
    on 2,000 characters). Both are refused whatever database checks the rest.
    """
    if len(pattern) > MAX_REGEX_LENGTH:
        return f"longer than {MAX_REGEX_LENGTH} characters"
    in_bracket = False
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            if not in_bracket and pattern[i + 1] in "123456789":
                return "backreferences (\\1 ... \\9) are not allowed: they can take exponential time"
            i += 2
            continue
        if c == "[" and not in_bracket:
            in_bracket = True
            # a ] right after [ or [^ is a literal member
            if pattern[i + 1 : i + 2] == "^":
                i += 1
            if pattern[i + 1 : i + 2] == "]":
                i += 1
        elif c == "]" and in_bracket:
            in_bracket = False
        i += 1
    return None


def basic_regex_check(pattern: str) -> str | None:
    """The offline regex check used when no ``regex_checker`` is given.

    Reports only mistakes that PostgreSQL would reject too (unbalanced
    parentheses or brackets, a quantifier with nothing to repeat, a reversed
    range); everything else is left to PostgreSQL, which checks every pattern
    when the policy is compiled against a database.
    """
    try:
        re.compile(pattern)
    except re.error as exc:
        if any(exc.msg.startswith(s) for s in _STRUCTURAL_REGEX_ERRORS):
            return str(exc)
    except (OverflowError, RecursionError) as exc:  # pragma: no cover - pathological
        return str(exc)
    return None
