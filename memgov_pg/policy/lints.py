"""The lints: passes over the finished rules that find what concerns them together.

Each is a function of the rules in evaluation order (``Policy.rules``) and the file's
name, returning its findings:

* :func:`auto_delete_lints`: an ``auto_delete`` rule without any condition deletes
  nearly everything (a warning);
* :func:`order_lints`: a write rule that earlier unconditional rules always pre-empt
  is never reached (an error: it is almost always a mistake in priorities); one that
  an earlier rule with a part of its conditions pre-empts never decides anything
  either (a warning: the policy still does what it says); two write rules that share
  a priority are ordered by the file (a warning). A rule that can never match at all
  is the satisfiability pass's (memgov_pg.policy.satisfiable) and is left out here.
"""

from __future__ import annotations

from collections.abc import Sequence

from .findings import PolicyError, error, warning
from .model import Rule
from .satisfiable import never_matches


def auto_delete_lints(rules: Sequence[Rule], file: str) -> list[PolicyError]:
    """An enabled auto_delete rule says what it deletes: a rule without any condition or category."""
    return [
        warning(file, rule.line, rule.id, "MGP502",
                "this auto_delete rule has no condition: the retention sweep deletes every"
                " memory except permanent_until_revoked ones")
        for rule in rules
        if rule.enabled and rule.is_retention and not rule.conditions and rule.category_scope is None
    ]  # fmt: skip


def order_lints(rules: Sequence[Rule], file: str) -> list[PolicyError]:
    """Shadowed rules (errors), pre-empted rules and shared priorities (warnings), on
    the enabled write rules in evaluation order (rules that can never match left out).

    A rule is shadowed when earlier unconditional rules (no condition besides
    the category scope) together cover its whole category scope: one such rule
    for every category, or several whose categories include all of its own.
    """
    found: list[PolicyError] = []
    seen: list[Rule] = []
    for rule in rules:
        if not rule.enabled or rule.is_retention:
            continue
        dead = never_matches(rule) is not None
        prior = None if dead else covering(seen, rule)
        if prior is not None:
            found.append(warning(file, rule.line, rule.id, "MGP503",
                f"rule is never reached: '{prior.id}' (priority {prior.priority}, line {prior.line})"
                " comes first and matches whenever this rule would (its conditions are a part of this rule's,"
                " its categories include this rule's)"))  # fmt: skip
        blockers = [] if dead or prior is not None else shadowing(seen, rule)
        if blockers:
            names = ", ".join(f"'{r.id}' (priority {r.priority}, line {r.line})" for r in blockers)
            scope = (
                "every category"
                if rule.category_scope is None
                else "its categories (" + ", ".join(rule.category_scope) + ")"
            )
            found.append(error(file, rule.line, rule.id, "MGP501",
                f"rule is never reached: {names} come{'s' if len(blockers) == 1 else ''}"
                f" first and match{'es' if len(blockers) == 1 else ''} {scope}"
                " unconditionally"))  # fmt: skip
        for earlier in seen:
            if earlier.priority == rule.priority:
                found.append(warning(file, rule.line, rule.id, "MGP504",
                    f"priority {rule.priority} is also used by rule '{earlier.id}'"
                    f" (line {earlier.line}); file order decides"))  # fmt: skip
                break
        seen.append(rule)
    return found


def covering(earlier: Sequence[Rule], rule: Rule) -> Rule | None:
    """An earlier conditional rule that matches every item ``rule`` matches: all of its
    conditions (match all) are among ``rule``'s (match all), and its category scope
    includes ``rule``'s. None when there is none."""

    def tests(r: Rule) -> frozenset[tuple[str, str, object]] | None:
        if r.match == "any" and len(r.conditions) > 1:
            return None
        return frozenset(
            (c.field, c.operator, frozenset(c.value) if isinstance(c.value, tuple) else c.value) for c in r.conditions
        )

    own = tests(rule)
    if own is None:
        return None
    for prior in earlier:
        theirs = tests(prior)
        if not prior.conditions or theirs is None or not theirs <= own:
            continue
        if prior.category_scope is None or (
            rule.category_scope is not None and set(rule.category_scope) <= set(prior.category_scope)
        ):
            return prior
    return None


def shadowing(earlier: Sequence[Rule], rule: Rule) -> list[Rule]:
    """The earlier unconditional rules that together catch everything ``rule``
    could match, or [] when ``rule`` is reachable."""
    blockers: list[Rule] = []
    missing = None if rule.category_scope is None else set(rule.category_scope)
    for prior in earlier:
        if not prior.is_unconditional:
            continue
        if prior.category_scope is None:
            return [prior]
        if missing is not None and missing & set(prior.category_scope):
            blockers.append(prior)
            missing -= set(prior.category_scope)
            if not missing:
                return blockers
    return []
