"""Whether a rule's conditions can ever hold, given the fields' types and ranges.

Sound, not complete: :func:`never_matches` names a reason only when no value of
the fields a rule reads satisfies its conditions, with the NULL semantics of the
compiled SQL (memgov_pg.condition_sql): ``eq``, ``in`` and the
comparisons are false on NULL, ``neq`` and ``nin`` true, ``eq null`` is IS NULL.
Conditions it cannot reason about (``contains``, ``regex``, time values) only
narrow a rule further, so leaving them out never calls a reachable rule dead.
:func:`satisfiability` is the pass over a policy's rules: a warning for each
enabled rule that can never match.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from .durations import RelativeTime
from .findings import PolicyError, warning
from .model import Condition, Rule
from .vocabulary import FieldType, lookup_field

_SETS = frozenset({"eq", "neq", "in", "nin"})
_BOUNDS = frozenset({"gt", "gte", "lt", "lte"})


def satisfiability(rules: Sequence[Rule], file: str) -> list[PolicyError]:
    """A warning for each enabled rule (write or retention) that can never match."""
    found: list[PolicyError] = []
    for rule in rules:
        reason = never_matches(rule) if rule.enabled else None
        if reason:
            found.append(warning(file, rule.line, rule.id, "MGP505", f"rule can never match: {reason}"))
    return found


def never_matches(rule: Rule) -> str | None:
    """Why ``rule`` can never match (a sentence), or None when it may."""
    if not rule.conditions:
        return None
    if rule.match == "any" and len(rule.conditions) > 1:
        reasons = [_field_reason(c.field, [c]) for c in rule.conditions]
        if all(reasons):
            return "none of its alternatives can hold: " + "; ".join(r for r in reasons if r)
        return None
    by_field: dict[str, list[Condition]] = {}
    for cond in rule.conditions:
        by_field.setdefault(cond.field, []).append(cond)
    for field, conditions in by_field.items():
        reason = _field_reason(field, conditions)
        if reason:
            return reason
    return None


def _field_reason(field: str, conditions: Sequence[Condition]) -> str | None:
    """Why no value of ``field`` satisfies all of ``conditions``, or None."""
    spec = lookup_field(field)
    if spec is None:
        return None
    tests = [c for c in conditions if c.operator in _SETS | _BOUNDS and not _opaque(c.value)]
    if not tests:
        return None
    shown = " and ".join(f"{c.operator} {show_value(c.value)}" for c in tests)
    if spec.type in (FieldType.ENUM, FieldType.BOOL):
        domain: set[Any] = set(spec.values or ()) if spec.type is FieldType.ENUM else {True, False}
        candidates = _filter(domain | {None}, tests)
        if not candidates:
            what = "one of " + ", ".join(sorted(map(str, domain))) if spec.values else "true or false"
            return f"no value of {field} satisfies {shown} (it is {what})"
        return None
    if spec.type in (FieldType.NUMERIC, FieldType.INT):
        interval = _Interval(spec.minimum, spec.maximum, integer=spec.type is FieldType.INT)
        if not _filter({None}, tests) and not interval.satisfiable(tests):
            bounds = f" (it is in {spec.minimum}..{spec.maximum})" if spec.minimum is not None else ""
            return f"no value of {field} satisfies {shown}{bounds}"
        return None
    if spec.type is FieldType.TEXT:
        positive = [c for c in tests if c.operator in ("eq", "in")]
        if positive and not _filter(_values(positive[0]), tests):
            return f"no value of {field} satisfies {shown}"
    return None


def _opaque(value: Any) -> bool:
    """Values this module does not compare: time values."""
    values = value if isinstance(value, tuple) else (value,)
    return any(isinstance(v, RelativeTime | dt.datetime) for v in values)


def _values(cond: Condition) -> set[Any]:
    return set(cond.value) if isinstance(cond.value, tuple) else {cond.value}


def _holds(cond: Condition, value: Any) -> bool:
    """Whether ``value`` (None: NULL) passes an eq / neq / in / nin test, as SQL decides it."""
    if cond.operator == "eq":
        return bool(value == cond.value)  # eq null: IS NULL
    if cond.operator == "neq":
        return bool(value != cond.value)
    if cond.operator == "in":
        return value in _values(cond)
    return value not in _values(cond)  # nin


def _filter(candidates: Iterable[Any], tests: Sequence[Condition]) -> set[Any]:
    """The candidate values every set test keeps; a bound keeps no NULL (it is false there)."""
    kept = set()
    for value in candidates:
        if all(_holds(c, value) for c in tests if c.operator in _SETS):
            if value is None and any(c.operator in _BOUNDS for c in tests):
                continue
            if value is not None and not all(_in_bound(c, value) for c in tests if c.operator in _BOUNDS):
                continue
            kept.add(value)
    return kept


def _in_bound(cond: Condition, value: Any) -> bool:
    try:
        if cond.operator == "gt":
            return bool(value > cond.value)
        if cond.operator == "gte":
            return bool(value >= cond.value)
        if cond.operator == "lt":
            return bool(value < cond.value)
        return bool(value <= cond.value)
    except TypeError:  # not comparable: make no claim
        return True


@dataclass(frozen=True)
class _Interval:
    """The values a numeric field can take: [lo, hi] (None: unbounded), integers only or any."""

    lo: Decimal | None
    hi: Decimal | None
    integer: bool

    def satisfiable(self, tests: Sequence[Condition]) -> bool:
        lo, lo_open, hi, hi_open = self.lo, False, self.hi, False
        points: set[Decimal] | None = None
        excluded: set[Decimal] = set()
        for c in tests:
            if c.operator in ("eq", "in"):
                values = {Decimal(v) for v in _values(c) if isinstance(v, int | Decimal) and not isinstance(v, bool)}
                points = values if points is None else points & values
            elif c.operator in ("neq", "nin"):
                excluded |= {Decimal(v) for v in _values(c) if isinstance(v, int | Decimal) and not isinstance(v, bool)}
            else:
                bound = Decimal(c.value)
                if c.operator in ("gt", "gte") and (lo is None or bound > lo or (bound == lo and c.operator == "gt")):
                    lo, lo_open = bound, c.operator == "gt"
                if c.operator in ("lt", "lte") and (hi is None or bound < hi or (bound == hi and c.operator == "lt")):
                    hi, hi_open = bound, c.operator == "lt"

        def inside(x: Decimal) -> bool:
            if self.integer and x != x.to_integral_value():
                return False
            above = lo is None or x > lo or (x == lo and not lo_open)
            below = hi is None or x < hi or (x == hi and not hi_open)
            return above and below and x not in excluded

        if points is not None:
            return any(inside(p) for p in points)
        if lo is None or hi is None:
            return True
        if self.integer:
            first = math.floor(lo) + 1 if lo_open else math.ceil(lo)
            last = math.ceil(hi) - 1 if hi_open else math.floor(hi)
            # a few excluded integers cannot empty a range longer than the exclusions
            return first <= last and (
                last - first + 1 > len(excluded) or any(Decimal(x) not in excluded for x in range(first, last + 1))
            )
        if lo > hi or (lo == hi and (lo_open or hi_open)):
            return False
        return not (lo == hi and lo in excluded)


def show_value(value: Any) -> str:
    """A condition's value as a policy file would write it."""
    if isinstance(value, tuple):
        return "[" + ", ".join(show_value(v) for v in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
