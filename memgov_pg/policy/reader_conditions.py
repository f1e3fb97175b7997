"""Reading a policy, conditions: ``when:`` lists and ``condition:`` maps ->
typed :class:`~memgov_pg.policy.model.Condition` s (functions of a
:class:`~memgov_pg.policy.reader_nodes.Reading`).

Each condition's field comes from the vocabulary's field table, its operator
must fit the field's type, and its value is read as that type (an enum value,
text, a bounded number, a boolean, a time value), with ``null`` only where
the field is nullable.
"""

from __future__ import annotations

import datetime as dt
import difflib
from typing import Any

from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..tenants import TENANT_ID_RULE, is_tenant_id
from ..tenants import show as show_value
from .durations import RELATIVE_RE, RelativeTime, parse_time_value
from .model import Condition
from .reader_nodes import INVALID, NULL, STR, TIMESTAMP, Reading, hint, line_of, one_of, show
from .regex_checks import regex_cost_problem
from .vocabulary import (
    FIELD_HINTS,
    FIELDS,
    INT4_MAX,
    KNOWN_CATEGORIES,
    METADATA_PREFIX,
    OPERATOR_HINTS,
    OPERATORS,
    FieldSpec,
    FieldType,
    lookup_field,
)

#: The keys of a ``when:`` entry.
WHEN_KEYS = ("field", "operator", "value")


def check_category_name(r: Reading, node: Node, rid: str, value: str) -> None:
    """Warn when ``value`` is not a known category but close to one (a likely typo)."""
    if value in KNOWN_CATEGORIES:
        return
    close = difflib.get_close_matches(value, KNOWN_CATEGORIES, n=1, cutoff=0.8)
    if close:
        r.warn(
            node,
            rid,
            "MGP401",
            f"category '{value}' is not a known category (did you mean '{close[0]}'?)",
        )


def read_when(r: Reading, node: Node, rid: str) -> list[Condition]:
    """``when:``: a list of ``{field, operator, value}`` conditions; the valid ones (mistakes reported)."""
    if not isinstance(node, SequenceNode):
        r.error(node, rid, "MGP402", f"when must be a list of conditions, got {show(node)}")
        return []
    if not node.value:
        r.error(node, rid, "MGP403", "when must not be an empty list (omit it instead)")
        return []
    out: list[Condition] = []
    for item in node.value:
        entry = r.mapping(item, rid, "condition", WHEN_KEYS, required=WHEN_KEYS)
        if entry is None or any(k not in entry for k in WHEN_KEYS):
            continue
        spec = read_field(r, entry["field"][1], rid)
        op = read_operator(r, entry["operator"][1], rid)
        if spec is None or op is None:
            continue
        if not operator_fits(r, entry["operator"][1], rid, spec, op):
            continue
        value = read_value(r, spec, op, entry["value"][1], rid)
        if value is not INVALID:
            out.append(Condition(spec.name, op, value, line_of(item)))
    return out


def read_condition_map(r: Reading, node: Node, rid: str) -> list[Condition]:
    """``condition:``: ``field: value`` (eq, or in for a list) or ``field: {operator: value}``
    (``older_than`` too); the valid conditions (mistakes reported).
    """
    items = r.mapping(node, rid, "condition", None)
    if items is None:
        return []
    if not items and isinstance(node, MappingNode) and not node.value:
        r.error(node, rid, "MGP404", "condition must not be an empty mapping (omit it instead)")
        return []
    out: list[Condition] = []
    for key_node, value_node in items.values():
        spec = read_field(r, key_node, rid)
        if spec is None:
            continue
        if isinstance(value_node, MappingNode):
            ops = r.mapping(value_node, rid, f"the operators of {spec.name}", None)
            if ops is None:
                continue
            if not ops and not value_node.value:
                r.error(value_node, rid, "MGP405", f"no operator given for {spec.name}")
                continue
            for op_node, op_value in ops.values():
                if op_node.value == "older_than":
                    if spec.type is not FieldType.TIMESTAMPTZ:
                        r.error(
                            op_node,
                            rid,
                            "MGP406",
                            f"older_than applies to time fields only; {spec.name} is {spec.type.value}",
                        )
                        continue
                    ago = r.duration(op_value, rid, "older_than")
                    if ago is not None:
                        rel = RelativeTime(ago, f"older_than: {op_value.value}")
                        out.append(Condition(spec.name, "lt", rel, line_of(op_node)))
                    continue
                op = read_operator(r, op_node, rid)
                if op is None or not operator_fits(r, op_node, rid, spec, op):
                    continue
                value = read_value(r, spec, op, op_value, rid)
                if value is not INVALID:
                    out.append(Condition(spec.name, op, value, line_of(op_node)))
        else:
            op = "in" if isinstance(value_node, SequenceNode) else "eq"
            if not operator_fits(r, value_node, rid, spec, op):
                continue
            value = read_value(r, spec, op, value_node, rid)
            if value is not INVALID:
                out.append(Condition(spec.name, op, value, line_of(key_node)))
    return out


def read_field(r: Reading, node: Node, rid: str) -> FieldSpec | None:
    """The field a name refers to (``metadata.<key>`` included), or None after reporting."""
    if not isinstance(node, ScalarNode) or node.tag != STR:
        r.error(node, rid, "MGP407", f"a field name must be a string, got {show(node)}")
        return None
    name: str = node.value
    spec = lookup_field(name)
    if spec is not None:
        return spec
    if name.startswith(METADATA_PREFIX):
        r.error(
            node,
            rid,
            "MGP408",
            f"invalid metadata key in '{name}': use letters, digits, '_', '-', '.', ':' (at most 128 characters)",
        )
        return None
    r.error(node, rid, "MGP409", f"unknown field '{name}'{hint(name, FIELDS, FIELD_HINTS)}")
    return None


def read_operator(r: Reading, node: Node, rid: str) -> str | None:
    """A known operator name, or None after reporting."""
    if not isinstance(node, ScalarNode) or node.tag != STR:
        r.error(node, rid, "MGP410", f"an operator must be a string, got {show(node)}")
        return None
    op: str = node.value
    if op not in OPERATORS:
        r.error(
            node,
            rid,
            "MGP411",
            f"unknown operator '{op}'{hint(op, OPERATORS, OPERATOR_HINTS)}; expected one of {one_of(OPERATORS)}",
        )
        return None
    return op


def operator_fits(r: Reading, node: Node, rid: str, spec: FieldSpec, op: str) -> bool:
    """Whether operator ``op`` applies to the field's type; reports it when not."""
    if op in spec.operators:
        return True
    allowed = [o for o in OPERATORS if o in spec.operators]
    r.error(
        node,
        rid,
        "MGP412",
        f"operator '{op}' does not apply to {spec.name} ({spec.type.value}); use one of {one_of(allowed)}",
    )
    return False


def read_value(r: Reading, spec: FieldSpec, op: str, node: Node, rid: str) -> Any:
    """The typed value of ``spec op node``, or INVALID after reporting."""
    if op in ("in", "nin"):
        if not isinstance(node, SequenceNode):
            r.error(node, rid, "MGP413", f"'{op}' takes a list of values, got {show(node)}")
            return INVALID
        if not node.value:
            r.error(node, rid, "MGP414", f"'{op}' needs at least one value")
            return INVALID
        items = [read_scalar(r, spec, op, item, rid) for item in node.value]
        if any(v is INVALID for v in items):
            return INVALID
        return tuple(dict.fromkeys(items))
    if isinstance(node, SequenceNode):
        r.error(node, rid, "MGP415", f"'{op}' takes a single value, got a list (use 'in' for a list)")
        return INVALID
    return read_scalar(r, spec, op, node, rid)


def read_scalar(r: Reading, spec: FieldSpec, op: str, node: Node, rid: str) -> Any:
    """The typed value of one scalar for ``spec op``, or INVALID after reporting."""
    name = spec.name
    if isinstance(node, ScalarNode) and node.tag == NULL:
        if op in ("eq", "neq") and spec.nullable:
            return None
        if op in ("eq", "neq"):
            r.error(node, rid, "MGP416", f"{name} is never null: null cannot be compared with it")
        else:
            r.error(node, rid, "MGP417", f"null is only allowed with eq/neq (on {name}: {op})")
        return INVALID

    if spec.type is FieldType.TIMESTAMPTZ:
        return read_time_value(r, spec, op, node, rid)
    if isinstance(node, MappingNode):
        r.error(node, rid, "MGP418", f"expected a {spec.type.value} value for {name}, got {show(node)}")
        return INVALID
    if op == "regex":
        pattern = r.string(node, rid, f"the regex for {name}")
        if pattern is None:
            return INVALID
        problem = regex_cost_problem(pattern) or r.regex_checker(pattern)
        if problem:
            r.error(node, rid, "MGP419", f"invalid regex {pattern!r}: {problem}")
            return INVALID
        return pattern
    if op == "contains":
        text = r.string(node, rid, f"the contains value for {name}")
        return INVALID if text is None else text

    if spec.type is FieldType.ENUM:
        assert spec.values is not None
        if not isinstance(node, ScalarNode) or node.tag != STR:
            r.error(
                node,
                rid,
                "MGP420",
                f"{name} must be one of {one_of(spec.values)}; got {show(node)}",
            )
            return INVALID
        if node.value not in spec.values:
            r.error(
                node,
                rid,
                "MGP421",
                f"'{node.value}' is not a valid {name}{hint(node.value, spec.values)};"
                f" expected one of {one_of(spec.values)}",
            )
            return INVALID
        return node.value
    if spec.type is FieldType.TEXT:
        if not isinstance(node, ScalarNode) or node.tag != STR:
            r.error(node, rid, "MGP422", f"{name} is text: expected a string, got {show(node)} (quote it)")
            return INVALID
        text = r.string(node, rid, f"the value for {name}", allow_empty=True)
        if text is not None and name == "category":
            if text == "*":
                r.error(node, rid, "MGP423", "'*' is not a category; omit the category test instead")
                return INVALID
            check_category_name(r, node, rid, text)
        if text is not None and name == "scope.tenant_id" and not is_tenant_id(text):
            # eq/neq/in/nin name tenants (contains and regex returned above): a name
            # no tenant can have is a mistake, not a rule that never matches
            r.error(node, rid, "MGP424", f"{show_value(text)} is not a tenant id: a tenant id is {TENANT_ID_RULE}")
            return INVALID
        return INVALID if text is None else text
    if spec.type is FieldType.BOOL:
        value = r.boolean(node, rid, name)
        return INVALID if value is None else value
    if spec.type is FieldType.NUMERIC:
        number = r.number(node, rid, name, spec.minimum, spec.maximum)
        return INVALID if number is None else number
    if spec.type is FieldType.INT:
        lo = int(spec.minimum) if spec.minimum is not None else -INT4_MAX - 1
        hi = int(spec.maximum) if spec.maximum is not None else INT4_MAX
        integer = r.integer(node, rid, name, lo, hi)
        return INVALID if integer is None else integer
    raise AssertionError(spec.type)  # pragma: no cover


def read_time_value(r: Reading, spec: FieldSpec, op: str, node: Node, rid: str) -> Any:
    """A time field's value: a RelativeTime or an aware datetime, or INVALID after reporting."""
    name = spec.name
    value: Any = INVALID
    if isinstance(node, MappingNode):
        items = r.mapping(node, rid, "a time value", ("older_than",), ("older_than",))
        if items is None or "older_than" not in items:
            return INVALID
        ago = r.duration(items["older_than"][1], rid, "older_than")
        if ago is None:
            return INVALID
        value = RelativeTime(ago, f"older_than: {items['older_than'][1].value}")
    elif isinstance(node, ScalarNode) and node.tag == TIMESTAMP:
        try:
            parsed = r.constructor.construct_yaml_timestamp(node)
        except (ConstructorError, ValueError) as exc:
            r.error(node, rid, "MGP425", f"invalid timestamp {node.value!r}: {exc}")
            return INVALID
        value = aware(r, node, rid, parsed)
    elif isinstance(node, ScalarNode) and node.tag == STR:
        text: str = node.value
        if RELATIVE_RE.fullmatch(text):
            try:
                value = parse_time_value(text)
            except ValueError as exc:
                r.error(node, rid, "MGP426", str(exc))
                return INVALID
        else:
            try:
                parsed = dt.datetime.fromisoformat(text)
            except ValueError:
                r.error(
                    node,
                    rid,
                    "MGP427",
                    f'invalid time value {text!r} for {name}: expected "now() - N'
                    ' minutes|hours|days|weeks", {older_than: "N days"} or an ISO 8601'
                    " timestamp with a UTC offset",
                )
                return INVALID
            value = aware(r, node, rid, parsed)
    else:
        r.error(
            node,
            rid,
            "MGP428",
            f'{name} is a time field: expected "now() - N days", {{older_than: "N days"}}'
            f" or an ISO 8601 timestamp, got {show(node)}",
        )
        return INVALID
    if isinstance(value, RelativeTime) and op in ("eq", "neq"):
        r.error(
            node,
            rid,
            "MGP429",
            f"'{op}' with a relative time never matches exactly; use lt, lte, gt or gte",
        )
        return INVALID
    return value


def aware(r: Reading, node: Node, rid: str, value: Any) -> Any:
    """``value`` if it is a datetime with a UTC offset, else INVALID after reporting."""
    if not isinstance(value, dt.datetime) or value.tzinfo is None:
        r.error(
            node,
            rid,
            "MGP430",
            f"timestamp {node.value!r} needs a time and a UTC offset (e.g. 2025-01-31T00:00:00Z)",
        )
        return INVALID
    return value
