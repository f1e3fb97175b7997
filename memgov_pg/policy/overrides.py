"""``memgov validate GLOBAL --override TENANT``: what a tenant override changes.

A tenant override is a complete policy that replaces the global one for its
tenant (``memgov deploy --tenant``): nothing of the global policy applies there.
So a rule the two share by id but not by content, a rule of the override that
decides otherwise what a global rule decides, and a global rule that refuses or
holds writes but has no counterpart in the override are what an author should
look at twice. Each is a warning on the override's rule (or the global rule
that has no counterpart); the settings that decide without a rule (mode,
on_policy_miss) are compared too.
"""

from __future__ import annotations

from .findings import PolicyError, warning
from .model import Policy, Rule
from .satisfiable import show_value

#: Actions whose loss in an override weakens the tenant's protection.
_GUARDS = frozenset({"deny", "quarantine", "require_approval"})


def _tests(rule: Rule) -> tuple[object, ...]:
    """What a rule matches: its scope, how its conditions combine, and the conditions."""
    conditions = frozenset(
        (c.field, c.operator, frozenset(c.value) if isinstance(c.value, tuple) else c.value) for c in rule.conditions
    )
    scope = None if rule.category_scope is None else frozenset(rule.category_scope)
    return (scope, rule.match if len(rule.conditions) > 1 else "all", conditions)


def _describe(rule: Rule) -> str:
    """What a rule matches, in a few words: its categories and its conditions."""
    scope = "every category" if rule.category_scope is None else "categories " + ", ".join(rule.category_scope)
    joiner = " or " if rule.match == "any" else " and "
    conditions = joiner.join(f"{c.field} {c.operator} {show_value(c.value)}" for c in rule.conditions)
    return f"{scope}{' when ' + conditions if conditions else ''}"


def compare_override(base: Policy, override: Policy, base_file: str, override_file: str) -> list[PolicyError]:
    """The warnings about ``override`` as the tenant override of the global policy ``base``."""
    found: list[PolicyError] = []

    def warn(file: str, line: int, rule_id: str, code: str, message: str) -> None:
        found.append(warning(file, line, rule_id, code, message))

    base_rules = [r for r in base.rules if r.enabled]
    own_rules = [r for r in override.rules if r.enabled]
    by_id = {r.id: r for r in base_rules}
    by_tests: dict[tuple[object, ...], list[Rule]] = {}
    for rule in base_rules:
        by_tests.setdefault(_tests(rule), []).append(rule)

    for rule in own_rules:
        twin = by_id.get(rule.id)
        if twin is not None and (twin.action, _tests(twin)) != (rule.action, _tests(rule)):
            what = (
                f"action {rule.action} here, {twin.action} there"
                if twin.action != rule.action
                else f"it matches {_describe(rule)} here, {_describe(twin)} there"
            )
            warn(override_file, rule.line, rule.id, "MGP601",
                 f"the global policy's rule '{rule.id}' ({base_file}:{twin.line}) differs: {what};"
                 " for the tenant only this one applies")  # fmt: skip
        for other in by_tests.get(_tests(rule), []):
            if other.id != rule.id and other.action != rule.action:
                warn(override_file, rule.line, rule.id, "MGP602",
                     f"decides {rule.action} where the global policy's rule '{other.id}'"
                     f" ({base_file}:{other.line}) decides {other.action} on the same conditions")  # fmt: skip

    own_ids = {r.id for r in own_rules}
    own_tests = {(_tests(r), r.action) for r in own_rules}
    for rule in base_rules:
        if rule.action in _GUARDS and rule.id not in own_ids and (_tests(rule), rule.action) not in own_tests:
            warn(base_file, rule.line, rule.id, "MGP603",
                 f"the override {override_file} has no such rule: for its tenant, this {rule.action}"
                 " does not apply")  # fmt: skip

    for name in ("mode", "on_policy_miss"):
        ours, theirs = getattr(override, name), getattr(base, name)
        if ours != theirs:
            warn(override_file, 1, "-", "MGP604", f"{name} is {ours} here, {theirs} in the global policy {base_file}")
    return found
