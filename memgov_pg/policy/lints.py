"""The policy reader, lints: findings about rules together rather than one value.

* a write rule that earlier unconditional rules always pre-empt is never
  reached (an error: it is almost always a mistake in priorities);
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
            if not rule.enabled or rule.is_retention:
                continue
            blockers = self.shadowing(seen, rule)
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
