"""The policy reader, rules: ``rules:`` -> :class:`~memgov_pg.policy.model.Rule` s
in evaluation order (priority, then file order).

A rule's id is read first so that every other finding names it; its
``category:`` and the category tests of an all-match rule fold into one
category scope; the lints run on the rules together at the end.
"""

from __future__ import annotations

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .lints import Lints
from .model import Condition, Rule, default_reason_code
from .reader_conditions import ConditionReader
from .reader_nodes import _INVALID, _NULL, _STR, _line, _peek_id, _show
from .vocabulary import ACTION_ALIASES, ACTIONS

#: The keys of a rule.
RULE_KEYS = (
    "id",
    "description",
    "priority",
    "enabled",
    "match",
    "when",
    "category",
    "condition",
    "action",
    "reason_codes",
)


class RuleReader(ConditionReader, Lints):
    """Reads ``rules:`` and each rule."""

    def rules(self, item: tuple[ScalarNode, Node] | None, root: Node) -> tuple[Rule, ...]:
        """``rules:`` in evaluation order (priority, then file order), checked by the ordering lints.

        A rule with a duplicate id or an error is dropped (and reported).
        """
        if item is None or (isinstance(item[1], ScalarNode) and item[1].tag == _NULL):
            self.warn(
                item[0] if item else root,
                "-",
                "the policy has no rules: every write gets on_policy_miss",
            )
            return ()
        node = item[1]
        if not isinstance(node, SequenceNode):
            self.error(node, "-", f"rules must be a list, got {_show(node)}")
            return ()
        if not node.value:
            self.warn(node, "-", "the policy has no rules: every write gets on_policy_miss")
        parsed: list[Rule] = []
        first_line: dict[str, int] = {}
        for index, rule_node in enumerate(node.value):
            rule_id = _peek_id(rule_node)
            duplicate = rule_id is not None and rule_id in first_line
            if rule_id is not None and duplicate:
                self.error(
                    rule_node,
                    rule_id,
                    f"duplicate rule id '{rule_id}' (first defined at line {first_line[rule_id]})",
                )
            elif rule_id is not None:
                first_line[rule_id] = _line(rule_node)
            rule = self.rule(rule_node, index)
            if rule is not None and not duplicate:
                parsed.append(rule)
        ordered = tuple(sorted(parsed, key=lambda r: (r.priority, r.index_in_file)))
        self.check_order(ordered)
        return ordered

    def rule(self, node: Node, index: int) -> Rule | None:
        """One rule (``index``: its position in ``rules:``), or None when it has errors (all reported)."""
        placeholder = f"rules[{index}]"
        if not isinstance(node, MappingNode):
            self.error(node, placeholder, f"a rule must be a mapping, got {_show(node)}")
            return None
        # The id first, so that every other message names the rule.
        rid = placeholder
        rule_id: str | None = None
        for key_node, value_node in node.value:
            if isinstance(key_node, ScalarNode) and key_node.tag == _STR and key_node.value == "id":
                rule_id = self.label(value_node, placeholder, "rule id")
                if rule_id is not None:
                    rid = rule_id
                break
        items = self.mapping(node, rid, "rule", RULE_KEYS, required=("id", "priority", "action"))
        if items is None:
            return None
        n_errors = len(self.errors)

        description = None
        if "description" in items:
            description = self.string(items["description"][1], rid, "description", allow_empty=True)
        priority = None
        if "priority" in items:
            priority = self.integer(items["priority"][1], rid, "priority")
        enabled: bool | None = True
        if "enabled" in items:
            enabled = self.boolean(items["enabled"][1], rid, "enabled")
        match: str | None = "all"
        if "match" in items:
            match = self.choice(items["match"][1], rid, "match", ("all", "any"))

        action = alias = None
        if "action" in items:
            action_node = items["action"][1]
            raw = self.choice(action_node, rid, "action", ACTIONS)
            if raw is not None:
                action = ACTION_ALIASES.get(raw, raw)
                alias = raw if raw in ACTION_ALIASES else None

        reason_codes: tuple[str, ...] | None = None
        if "reason_codes" in items:
            reason_codes = self.reason_codes(items["reason_codes"][1], rid)
        elif rule_id is not None:
            reason_codes = (default_reason_code(rule_id),)

        scope: frozenset[str] | None = None
        scope_order: list[str] = []
        scope_ok = True
        if "category" in items:
            parsed_scope = self.category_scope(items["category"][1], rid)
            if parsed_scope is _INVALID:
                scope_ok = False
            elif parsed_scope is not None:
                assert isinstance(parsed_scope, tuple)
                scope = frozenset(parsed_scope)
                scope_order.extend(parsed_scope)

        conditions: list[Condition] = []
        if "when" in items:
            conditions.extend(self.when(items["when"][1], rid))
        if "condition" in items:
            if match == "any":
                self.error(
                    items["condition"][0],
                    rid,
                    "'condition:' is always ANDed and cannot be combined with 'match: any';"
                    " write the alternatives under 'when:'",
                )
            conditions.extend(self.condition_map(items["condition"][1], rid))

        # Fold category eq/in tests of an all-match rule into the category scope.
        if match == "all":
            kept: list[Condition] = []
            for cond in conditions:
                if cond.field == "category" and cond.operator in ("eq", "in"):
                    values = cond.value if isinstance(cond.value, tuple) else (cond.value,)
                    scope = frozenset(values) if scope is None else scope & frozenset(values)
                    scope_order.extend(values)
                else:
                    kept.append(cond)
            conditions = kept
        category_scope: tuple[str, ...] | None = None
        if scope is not None:
            category_scope = tuple(dict.fromkeys(c for c in scope_order if c in scope))
            if not category_scope and scope_ok:
                self.error(
                    node,
                    rid,
                    "the rule's category tests contradict each other: it can never match",
                )

        if action == "auto_delete":
            self.check_auto_delete(node, rid, conditions, category_scope, enabled)

        if len(self.errors) != n_errors or not scope_ok:
            return None
        if rule_id is None or priority is None or action is None or reason_codes is None:
            return None
        assert enabled is not None and match is not None
        return Rule(
            id=rule_id,
            description=description,
            priority=priority,
            enabled=enabled,
            match=match,  # type: ignore[arg-type]
            category_scope=category_scope,
            conditions=tuple(conditions),
            action=action,  # type: ignore[arg-type]
            action_alias=alias,
            reason_codes=reason_codes,
            line=_line(node),
            index_in_file=index,
        )

    def reason_codes(self, node: Node, rid: str) -> tuple[str, ...] | None:
        """``reason_codes:``: a non-empty list of labels, duplicates dropped, or None after reporting."""
        if not isinstance(node, SequenceNode):
            self.error(node, rid, f"reason_codes must be a list of strings, got {_show(node)}")
            return None
        if not node.value:
            self.error(node, rid, "reason_codes must not be empty (omit it for the default)")
            return None
        codes: list[str] = []
        ok = True
        for item in node.value:
            code = self.label(item, rid, "a reason code")
            if code is None:
                ok = False
            elif code not in codes:
                codes.append(code)
        return tuple(codes) if ok else None

    def category_scope(self, node: Node, rid: str) -> object:
        """``category:`` -> tuple of categories, None for ``"*"``, or _INVALID."""
        if isinstance(node, ScalarNode) and node.tag == _STR and node.value == "*":
            return None
        if isinstance(node, SequenceNode):
            if not node.value:
                self.error(node, rid, 'category must not be an empty list (use "*" for all)')
                return _INVALID
            items = node.value
        elif isinstance(node, ScalarNode) and node.tag == _STR:
            items = [node]
        else:
            self.error(node, rid, f'category must be a string, a list of strings or "*", got {_show(node)}')
            return _INVALID
        out: list[str] = []
        ok = True
        for item in items:
            if isinstance(item, ScalarNode) and item.tag == _STR and item.value == "*":
                if len(items) > 1:
                    self.error(item, rid, '"*" cannot be combined with other categories')
                    ok = False
                continue
            value = self.label(item, rid, "a category")
            if value is None:
                ok = False
                continue
            self.check_category_name(item, rid, value)
            if value not in out:
                out.append(value)
        return tuple(out) if ok else _INVALID
