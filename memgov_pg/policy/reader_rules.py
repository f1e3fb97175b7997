"""Reading a policy, rules: ``rules:`` -> :class:`~memgov_pg.policy.model.Rule` s
in evaluation order (priority, then file order).

A rule's id is read first so that every other finding names it; its
``category:`` and the category tests of an all-match rule fold into one
category scope. What concerns the rules together (order, reachability,
satisfiability) is left to the passes over the finished rules (:mod:`.lints`,
:mod:`.satisfiable`).
"""

from __future__ import annotations

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .model import Condition, Rule, default_reason_code
from .reader_conditions import check_category_name, read_condition_map, read_when
from .reader_nodes import INVALID, STR, Reading, is_null, line_of, peek_id, show
from .vocabulary import ACTION_ALIASES, ACTIONS, WRITE_ONLY_FIELDS

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


def read_rules(r: Reading, item: tuple[ScalarNode, Node] | None, root: Node) -> tuple[Rule, ...]:
    """``rules:`` in evaluation order (priority, then file order).

    A rule with a duplicate id or an error is dropped (and reported).
    """
    node = None if item is None or is_null(item[1]) else item[1]
    if node is not None and not isinstance(node, SequenceNode):
        r.error(node, "-", "MGP302", f"rules must be a list, got {show(node)}")
        return ()
    if node is None or not node.value:
        where = node if node is not None else item[0] if item is not None else root
        r.warn(where, "-", "MGP301", "the policy has no rules: every write gets on_policy_miss")
        return ()
    parsed: list[Rule] = []
    first_line: dict[str, int] = {}
    for index, rule_node in enumerate(node.value):
        rule_id = peek_id(rule_node)
        duplicate = rule_id is not None and rule_id in first_line
        if rule_id is not None and duplicate:
            r.error(
                rule_node,
                rule_id,
                "MGP303",
                f"duplicate rule id '{rule_id}' (first defined at line {first_line[rule_id]})",
            )
        elif rule_id is not None:
            first_line[rule_id] = line_of(rule_node)
        rule = read_rule(r, rule_node, index)
        if rule is not None and not duplicate:
            parsed.append(rule)
    return tuple(sorted(parsed, key=lambda rule: (rule.priority, rule.index_in_file)))


def read_rule(r: Reading, node: Node, index: int) -> Rule | None:
    """One rule (``index``: its position in ``rules:``), or None when it has errors (all reported)."""
    placeholder = f"rules[{index}]"
    if not isinstance(node, MappingNode):
        r.error(node, placeholder, "MGP304", f"a rule must be a mapping, got {show(node)}")
        return None
    # The id first, so that every other message names the rule.
    rid = placeholder
    rule_id: str | None = None
    for key_node, value_node in node.value:
        if isinstance(key_node, ScalarNode) and key_node.tag == STR and key_node.value == "id":
            rule_id = r.label(value_node, placeholder, "rule id")
            if rule_id is not None:
                rid = rule_id
            break
    items = r.mapping(node, rid, "rule", RULE_KEYS, required=("id", "priority", "action"))
    if items is None:
        return None
    n_errors = len(r.errors)

    description = None
    if "description" in items:
        description = r.string(items["description"][1], rid, "description", allow_empty=True)
    priority = None
    if "priority" in items:
        priority = r.integer(items["priority"][1], rid, "priority")
    enabled: bool | None = True
    if "enabled" in items:
        enabled = r.boolean(items["enabled"][1], rid, "enabled")
    match: str | None = "all"
    if "match" in items:
        match = r.choice(items["match"][1], rid, "match", ("all", "any"))

    action = alias = None
    if "action" in items:
        action_node = items["action"][1]
        raw = r.choice(action_node, rid, "action", ACTIONS)
        if raw is not None:
            action = ACTION_ALIASES.get(raw, raw)
            alias = raw if raw in ACTION_ALIASES else None

    reason_codes: tuple[str, ...] | None = None
    if "reason_codes" in items:
        reason_codes = read_reason_codes(r, items["reason_codes"][1], rid)
    elif rule_id is not None:
        reason_codes = (default_reason_code(rule_id),)

    scope: frozenset[str] | None = None
    scope_order: list[str] = []
    scope_ok = True
    if "category" in items:
        parsed_scope = read_category_scope(r, items["category"][1], rid)
        if parsed_scope is INVALID:
            scope_ok = False
        elif parsed_scope is not None:
            assert isinstance(parsed_scope, tuple)
            scope = frozenset(parsed_scope)
            scope_order.extend(parsed_scope)

    conditions: list[Condition] = []
    if "when" in items:
        conditions.extend(read_when(r, items["when"][1], rid))
    if "condition" in items:
        if match == "any":
            r.error(
                items["condition"][0],
                rid,
                "MGP305",
                "'condition:' is always ANDed and cannot be combined with 'match: any';"
                " write the alternatives under 'when:'",
            )
        conditions.extend(read_condition_map(r, items["condition"][1], rid))

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
            r.error(
                node,
                rid,
                "MGP306",
                "the rule's category tests contradict each other: it can never match",
            )

    if action == "auto_delete":
        # the retention sweep decides on stored rows: what exists only during a write is not there
        for cond in conditions:
            if cond.field in WRITE_ONLY_FIELDS:
                r.error(
                    cond.line,
                    rid,
                    "MGP307",
                    f"auto_delete rules run in the retention sweep, where '{cond.field}'"
                    f" does not exist (it is only known while a write is decided)",
                )

    if len(r.errors) != n_errors or not scope_ok:
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
        line=line_of(node),
        index_in_file=index,
    )


def read_reason_codes(r: Reading, node: Node, rid: str) -> tuple[str, ...] | None:
    """``reason_codes:``: a non-empty list of labels, duplicates dropped, or None after reporting."""
    if not isinstance(node, SequenceNode):
        r.error(node, rid, "MGP308", f"reason_codes must be a list of strings, got {show(node)}")
        return None
    if not node.value:
        r.error(node, rid, "MGP309", "reason_codes must not be empty (omit it for the default)")
        return None
    codes: list[str] = []
    ok = True
    for item in node.value:
        code = r.label(item, rid, "a reason code")
        if code is None:
            ok = False
        elif code not in codes:
            codes.append(code)
    return tuple(codes) if ok else None


def read_category_scope(r: Reading, node: Node, rid: str) -> object:
    """``category:`` -> tuple of categories, None for ``"*"``, or INVALID."""
    if isinstance(node, ScalarNode) and node.tag == STR and node.value == "*":
        return None
    if isinstance(node, SequenceNode):
        if not node.value:
            r.error(node, rid, "MGP310", 'category must not be an empty list (use "*" for all)')
            return INVALID
        items = node.value
    elif isinstance(node, ScalarNode) and node.tag == STR:
        items = [node]
    else:
        r.error(node, rid, "MGP311", f'category must be a string, a list of strings or "*", got {show(node)}')
        return INVALID
    out: list[str] = []
    ok = True
    for item in items:
        if isinstance(item, ScalarNode) and item.tag == STR and item.value == "*":
            if len(items) > 1:
                r.error(item, rid, "MGP312", '"*" cannot be combined with other categories')
                ok = False
            continue
        value = r.label(item, rid, "a category")
        if value is None:
            ok = False
            continue
        check_category_name(r, item, rid, value)
        if value not in out:
            out.append(value)
    return tuple(out) if ok else INVALID
