"""The policy reader, conditions: ``when:`` lists and ``condition:`` maps ->
typed :class:`~memgov_pg.policy.model.Condition` s.

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
from .reader_nodes import (
    _INVALID,
    _NULL,
    _STR,
    _TIMESTAMP,
    NodeReader,
    _hint,
    _line,
    _one_of,
    _show,
)
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


class ConditionReader(NodeReader):
    """Reads the conditions of a rule (and checks category names)."""

    def check_category_name(self, node: Node, rid: str, value: str) -> None:
        """Warn when ``value`` is not a known category but close to one (a likely typo)."""
        if value in KNOWN_CATEGORIES:
            return
        close = difflib.get_close_matches(value, KNOWN_CATEGORIES, n=1, cutoff=0.8)
        if close:
            self.warn(
                node,
                rid,
                f"category '{value}' is not a known category (did you mean '{close[0]}'?)",
            )

    # -- conditions ---------------------------------------------------------

    def when(self, node: Node, rid: str) -> list[Condition]:
        """``when:``: a list of ``{field, operator, value}`` conditions; the valid ones (mistakes reported)."""
        if not isinstance(node, SequenceNode):
            self.error(node, rid, f"when must be a list of conditions, got {_show(node)}")
            return []
        if not node.value:
            self.error(node, rid, "when must not be an empty list (omit it instead)")
            return []
        out: list[Condition] = []
        for item in node.value:
            entry = self.mapping(item, rid, "condition", WHEN_KEYS, required=WHEN_KEYS)
            if entry is None or any(k not in entry for k in WHEN_KEYS):
                continue
            spec = self.field(entry["field"][1], rid)
            op = self.operator(entry["operator"][1], rid)
            if spec is None or op is None:
                continue
            if not self.operator_fits(entry["operator"][1], rid, spec, op):
                continue
            value = self.value(spec, op, entry["value"][1], rid)
            if value is not _INVALID:
                out.append(Condition(spec.name, op, value, _line(item)))
        return out

    def condition_map(self, node: Node, rid: str) -> list[Condition]:
        """``condition:``: ``field: value`` (eq, or in for a list) or ``field: {operator: value}``
        (``older_than`` too); the valid conditions (mistakes reported).
        """
        items = self.mapping(node, rid, "condition", None)
        if items is None:
            return []
        if not items and isinstance(node, MappingNode) and not node.value:
            self.error(node, rid, "condition must not be an empty mapping (omit it instead)")
            return []
        out: list[Condition] = []
        for key_node, value_node in items.values():
            spec = self.field(key_node, rid)
            if spec is None:
                continue
            if isinstance(value_node, MappingNode):
                ops = self.mapping(value_node, rid, f"the operators of {spec.name}", None)
                if ops is None:
                    continue
                if not ops and not value_node.value:
                    self.error(value_node, rid, f"no operator given for {spec.name}")
                    continue
                for op_node, op_value in ops.values():
                    if op_node.value == "older_than":
                        if spec.type is not FieldType.TIMESTAMPTZ:
                            self.error(
                                op_node,
                                rid,
                                f"older_than applies to time fields only; {spec.name} is {spec.type.value}",
                            )
                            continue
                        ago = self.duration(op_value, rid, "older_than")
                        if ago is not None:
                            rel = RelativeTime(ago, f"older_than: {op_value.value}")
                            out.append(Condition(spec.name, "lt", rel, _line(op_node)))
                        continue
                    op = self.operator(op_node, rid)
                    if op is None or not self.operator_fits(op_node, rid, spec, op):
                        continue
                    value = self.value(spec, op, op_value, rid)
                    if value is not _INVALID:
                        out.append(Condition(spec.name, op, value, _line(op_node)))
            else:
                op = "in" if isinstance(value_node, SequenceNode) else "eq"
                if not self.operator_fits(value_node, rid, spec, op):
                    continue
                value = self.value(spec, op, value_node, rid)
                if value is not _INVALID:
                    out.append(Condition(spec.name, op, value, _line(key_node)))
        return out

    def field(self, node: Node, rid: str) -> FieldSpec | None:
        """The field a name refers to (``metadata.<key>`` included), or None after reporting."""
        if not isinstance(node, ScalarNode) or node.tag != _STR:
            self.error(node, rid, f"a field name must be a string, got {_show(node)}")
            return None
        name: str = node.value
        spec = lookup_field(name)
        if spec is not None:
            return spec
        if name.startswith(METADATA_PREFIX):
            self.error(
                node,
                rid,
                f"invalid metadata key in '{name}': use letters, digits, '_', '-', '.', ':' (at most 128 characters)",
            )
            return None
        self.error(node, rid, f"unknown field '{name}'{_hint(name, FIELDS, FIELD_HINTS)}")
        return None

    def operator(self, node: Node, rid: str) -> str | None:
        """A known operator name, or None after reporting."""
        if not isinstance(node, ScalarNode) or node.tag != _STR:
            self.error(node, rid, f"an operator must be a string, got {_show(node)}")
            return None
        op: str = node.value
        if op not in OPERATORS:
            self.error(
                node,
                rid,
                f"unknown operator '{op}'{_hint(op, OPERATORS, OPERATOR_HINTS)}; expected one of {_one_of(OPERATORS)}",
            )
            return None
        return op

    def operator_fits(self, node: Node, rid: str, spec: FieldSpec, op: str) -> bool:
        """Whether operator ``op`` applies to the field's type; reports it when not."""
        if op in spec.operators:
            return True
        allowed = [o for o in OPERATORS if o in spec.operators]
        self.error(
            node,
            rid,
            f"operator '{op}' does not apply to {spec.name} ({spec.type.value}); use one of {_one_of(allowed)}",
        )
        return False

    def value(self, spec: FieldSpec, op: str, node: Node, rid: str) -> Any:
        """The typed value of ``spec op node``, or _INVALID after reporting."""
        if op in ("in", "nin"):
            if not isinstance(node, SequenceNode):
                self.error(node, rid, f"'{op}' takes a list of values, got {_show(node)}")
                return _INVALID
            if not node.value:
                self.error(node, rid, f"'{op}' needs at least one value")
                return _INVALID
            items = [self.scalar(spec, op, item, rid) for item in node.value]
            if any(v is _INVALID for v in items):
                return _INVALID
            return tuple(dict.fromkeys(items))
        if isinstance(node, SequenceNode):
            self.error(node, rid, f"'{op}' takes a single value, got a list (use 'in' for a list)")
            return _INVALID
        return self.scalar(spec, op, node, rid)

    def scalar(self, spec: FieldSpec, op: str, node: Node, rid: str) -> Any:
        """The typed value of one scalar for ``spec op``, or _INVALID after reporting."""
        name = spec.name
        if isinstance(node, ScalarNode) and node.tag == _NULL:
            if op in ("eq", "neq") and spec.nullable:
                return None
            if op in ("eq", "neq"):
                self.error(node, rid, f"{name} is never null: null cannot be compared with it")
            else:
                self.error(node, rid, f"null is only allowed with eq/neq (on {name}: {op})")
            return _INVALID

        if spec.type is FieldType.TIMESTAMPTZ:
            return self.time_value(spec, op, node, rid)
        if isinstance(node, MappingNode):
            self.error(node, rid, f"expected a {spec.type.value} value for {name}, got {_show(node)}")
            return _INVALID
        if op == "regex":
            pattern = self.string(node, rid, f"the regex for {name}")
            if pattern is None:
                return _INVALID
            problem = regex_cost_problem(pattern) or self.regex_checker(pattern)
            if problem:
                self.error(node, rid, f"invalid regex {pattern!r}: {problem}")
                return _INVALID
            return pattern
        if op == "contains":
            text = self.string(node, rid, f"the contains value for {name}")
            return _INVALID if text is None else text

        if spec.type is FieldType.ENUM:
            assert spec.values is not None
            if not isinstance(node, ScalarNode) or node.tag != _STR:
                self.error(
                    node,
                    rid,
                    f"{name} must be one of {_one_of(spec.values)}; got {_show(node)}",
                )
                return _INVALID
            if node.value not in spec.values:
                self.error(
                    node,
                    rid,
                    f"'{node.value}' is not a valid {name}{_hint(node.value, spec.values)};"
                    f" expected one of {_one_of(spec.values)}",
                )
                return _INVALID
            return node.value
        if spec.type is FieldType.TEXT:
            if not isinstance(node, ScalarNode) or node.tag != _STR:
                self.error(node, rid, f"{name} is text: expected a string, got {_show(node)} (quote it)")
                return _INVALID
            text = self.string(node, rid, f"the value for {name}", allow_empty=True)
            if text is not None and name == "category":
                if text == "*":
                    self.error(node, rid, "'*' is not a category; omit the category test instead")
                    return _INVALID
                self.check_category_name(node, rid, text)
            if text is not None and name == "scope.tenant_id" and not is_tenant_id(text):
                # eq/neq/in/nin name tenants (contains and regex returned above): a name
                # no tenant can have is a mistake, not a rule that never matches
                self.error(node, rid, f"{show_value(text)} is not a tenant id: a tenant id is {TENANT_ID_RULE}")
                return _INVALID
            return _INVALID if text is None else text
        if spec.type is FieldType.BOOL:
            value = self.boolean(node, rid, name)
            return _INVALID if value is None else value
        if spec.type is FieldType.NUMERIC:
            number = self.number(node, rid, name, spec.minimum, spec.maximum)
            return _INVALID if number is None else number
        if spec.type is FieldType.INT:
            lo = int(spec.minimum) if spec.minimum is not None else -INT4_MAX - 1
            hi = int(spec.maximum) if spec.maximum is not None else INT4_MAX
            integer = self.integer(node, rid, name, lo, hi)
            return _INVALID if integer is None else integer
        raise AssertionError(spec.type)  # pragma: no cover

    def time_value(self, spec: FieldSpec, op: str, node: Node, rid: str) -> Any:
        """A time field's value: a RelativeTime or an aware datetime, or _INVALID after reporting."""
        name = spec.name
        value: Any = _INVALID
        if isinstance(node, MappingNode):
            items = self.mapping(node, rid, "a time value", ("older_than",), ("older_than",))
            if items is None or "older_than" not in items:
                return _INVALID
            ago = self.duration(items["older_than"][1], rid, "older_than")
            if ago is None:
                return _INVALID
            value = RelativeTime(ago, f"older_than: {items['older_than'][1].value}")
        elif isinstance(node, ScalarNode) and node.tag == _TIMESTAMP:
            try:
                parsed = self._constructor.construct_yaml_timestamp(node)
            except (ConstructorError, ValueError) as exc:
                self.error(node, rid, f"invalid timestamp {node.value!r}: {exc}")
                return _INVALID
            value = self.aware(node, rid, parsed)
        elif isinstance(node, ScalarNode) and node.tag == _STR:
            text: str = node.value
            if RELATIVE_RE.fullmatch(text):
                try:
                    value = parse_time_value(text)
                except ValueError as exc:
                    self.error(node, rid, str(exc))
                    return _INVALID
            else:
                try:
                    parsed = dt.datetime.fromisoformat(text)
                except ValueError:
                    self.error(
                        node,
                        rid,
                        f'invalid time value {text!r} for {name}: expected "now() - N'
                        ' minutes|hours|days|weeks", {older_than: "N days"} or an ISO 8601'
                        " timestamp with a UTC offset",
                    )
                    return _INVALID
                value = self.aware(node, rid, parsed)
        else:
            self.error(
                node,
                rid,
                f'{name} is a time field: expected "now() - N days", {{older_than: "N days"}}'
                f" or an ISO 8601 timestamp, got {_show(node)}",
            )
            return _INVALID
        if isinstance(value, RelativeTime) and op in ("eq", "neq"):
            self.error(
                node,
                rid,
                f"'{op}' with a relative time never matches exactly; use lt, lte, gt or gte",
            )
            return _INVALID
        return value

    def aware(self, node: Node, rid: str, value: Any) -> Any:
        """``value`` if it is a datetime with a UTC offset, else _INVALID after reporting."""
        if not isinstance(value, dt.datetime) or value.tzinfo is None:
            self.error(
                node,
                rid,
                f"timestamp {node.value!r} needs a time and a UTC offset (e.g. 2025-01-31T00:00:00Z)",
            )
            return _INVALID
        return value
