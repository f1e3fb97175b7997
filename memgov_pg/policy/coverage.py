"""Which (category × source × operation) combinations a policy leaves to ``on_policy_miss``.

A static reading of the write rules, for ``memgov validate``: for each combination of
a category the rules name (or any other category), a fact source and an operation
the policy decides, a rule in scope whose conditions read nothing but the operation
and the source **decides** it when those conditions hold; a rule that reads other
fields too **may** decide it. A combination no rule decides falls to
``on_policy_miss`` always (no rule can match) or may (only rules that read other
fields can). The operations are the writes, and the reads when the policy governs
reads; a search has no source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .model import Condition, Policy, Rule
from .vocabulary import OPERATION_TYPES, READ_OPERATIONS, SOURCES

#: the category of an item whose category no rule names
OTHER = "*other*"
_KNOWN = ("operation_type", "source")


@dataclass(frozen=True)
class Coverage:
    """The combinations that fall to ``on_policy_miss``: ``always`` and ``may``, as
    (category, source, operation) with source None for a search."""

    on_policy_miss: str
    combinations: int
    always: tuple[tuple[str, str | None, str], ...]
    may: tuple[tuple[str, str | None, str], ...]

    def as_json(self) -> dict[str, Any]:
        """The summary in ``memgov validate --json``."""

        def rows(combos: tuple[tuple[str, str | None, str], ...]) -> list[dict[str, Any]]:
            return [{"category": c, "source": s, "operation": o} for c, s, o in combos]

        return {"on_policy_miss": self.on_policy_miss, "combinations": self.combinations,
                "always": rows(self.always), "may": rows(self.may)}  # fmt: skip


def _holds(cond: Condition, value: str | None) -> bool:
    """Whether an eq, in, neq or nin condition on the operation or the source holds for
    ``value`` (on NULL: eq and in false, neq and nin true; ``eq: null`` is IS NULL)."""
    values = cond.value if isinstance(cond.value, tuple) else (cond.value,)
    if cond.operator in ("eq", "in"):
        return value is not None and value in values if cond.value is not None else value is None
    return value is None or value not in values if cond.value is not None else value is not None


def _verdict(rule: Rule, category: str, source: str | None, operation: str) -> Literal["decides", "may", "no"]:
    if rule.category_scope is not None and category not in rule.category_scope:
        return "no"
    known = [c for c in rule.conditions if c.field in _KNOWN and c.operator in ("eq", "in", "neq", "nin")]
    other = len(known) < len(rule.conditions)
    results = [_holds(c, operation if c.field == "operation_type" else source) for c in known]
    if rule.match == "any":
        if any(results):
            return "decides"
        return "may" if other else ("decides" if not rule.conditions else "no")
    if not all(results):
        return "no"
    return "may" if other else "decides"


def coverage(policy: Policy) -> Coverage:
    """Which combinations the policy's write rules leave to on_policy_miss."""
    rules = policy.write_rules
    categories = [*sorted({c for r in rules for c in r.category_scope or ()}), OTHER]
    operations = [o for o in OPERATION_TYPES if policy.governs_reads or o not in READ_OPERATIONS]
    always: list[tuple[str, str | None, str]] = []
    may: list[tuple[str, str | None, str]] = []
    total = 0
    for operation in operations:
        for source in (None,) if operation == "search" else SOURCES:
            for category in categories:
                total += 1
                verdicts = {_verdict(r, category, source, operation) for r in rules}
                if "decides" in verdicts:
                    continue
                (may if "may" in verdicts else always).append((category, source, operation))
    return Coverage(policy.on_policy_miss, total, tuple(always), tuple(may))
