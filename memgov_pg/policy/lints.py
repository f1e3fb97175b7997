"""The policy reader, lints: findings about rules together rather than one value.

* a write rule that earlier unconditional rules always pre-empt is never
  reached (an error: it is almost always a mistake in priorities);
* one that an earlier rule with a part of its conditions pre-empts, and a rule
  whose conditions no value of its fields satisfies (memgov_pg.policy.satisfiable),
  never decide anything either (warnings: the policy still does what it says,
  and a rule kept for later, or switched off by a condition, is deployable);
* two write rules that share a priority are ordered by the file (a warning);
* an ``auto_delete`` rule that reads a field the retention sweep does not
  have is an error; one without any condition deletes nearly everything (a
  warning).
"""

from __future__ import annotations

from collections.abc import Sequence

from yaml.nodes import Node

from .model import Condition, Rule
from .reader_nodes import NodeReader
from .satisfiable import never_matches
from .vocabulary import WRITE_ONLY_FIELDS


class Lints(NodeReader):
    """Whole-rule and whole-policy checks."""

    def check_auto_delete(
        self,
        node: Node,
        rid: str,
        conditions: Sequence[Condition],
        category_scope: tuple[str, ...] | None,
        enabled: bool | None,
    ) -> None:
        """An auto_delete rule reads only what the retention sweep has, and says what it deletes."""
        for cond in conditions:
            if cond.field in WRITE_ONLY_FIELDS:
                self.error(
                    cond.line,
                    rid,
                    f"auto_delete rules run in the retention sweep, where '{cond.field}'"
                    f" does not exist (it is only known while a write is decided)",
                )
        if not conditions and category_scope is None and enabled:
            self.warn(
                node,
                rid,
                "this auto_delete rule has no condition: the retention sweep deletes every"
                " memory except permanent_until_revoked ones",
            )

    def check_order(self, rules: Sequence[Rule]) -> None:
        """Shadowed rules (errors) and shared priorities (warnings), on the
        enabled write rules in evaluation order.

        A rule is shadowed when earlier unconditional rules (no condition besides
        the category scope) together cover its whole category scope: one such rule
        for every category, or several whose categories include all of its own.
        """
        seen: list[Rule] = []
        for rule in rules:
            if not rule.enabled:
                continue
            dead = never_matches(rule)
            if dead:
                self.warn(rule.line, rule.id, f"rule can never match: {dead}")
            if rule.is_retention:
                continue
            covering = None if dead else self.covering(seen, rule)
            if covering:
                self.warn(
                    rule.line,
                    rule.id,
                    f"rule is never reached: '{covering.id}' (priority {covering.priority}, line {covering.line})"
                    " comes first and matches whenever this rule would (its conditions are a part of this rule's,"
                    " its categories include this rule's)",
                )
            blockers = [] if dead or covering else self.shadowing(seen, rule)
            if blockers:
                names = ", ".join(f"'{r.id}' (priority {r.priority}, line {r.line})" for r in blockers)
                scope = (
                    "every category"
                    if rule.category_scope is None
                    else "its categories (" + ", ".join(rule.category_scope) + ")"
                )
                self.error(
                    rule.line,
                    rule.id,
                    f"rule is never reached: {names} come{'s' if len(blockers) == 1 else ''}"
                    f" first and match{'es' if len(blockers) == 1 else ''} {scope}"
                    " unconditionally",
                )
            for earlier in seen:
                if earlier.priority == rule.priority:
                    self.warn(
                        rule.line,
                        rule.id,
                        f"priority {rule.priority} is also used by rule '{earlier.id}'"
                        f" (line {earlier.line}); file order decides",
                    )
                    break
            seen.append(rule)

    @staticmethod
    def covering(earlier: Sequence[Rule], rule: Rule) -> Rule | None:
        """An earlier conditional rule that matches every item ``rule`` matches: all of its
        conditions (match all) are among ``rule``'s (match all), and its category scope
        includes ``rule``'s. None when there is none."""

        def tests(r: Rule) -> frozenset[tuple[str, str, object]] | None:
            if r.match == "any" and len(r.conditions) > 1:
                return None
            return frozenset(
                (c.field, c.operator, frozenset(c.value) if isinstance(c.value, tuple) else c.value)
                for c in r.conditions
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

    @staticmethod
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
