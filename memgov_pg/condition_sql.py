"""One policy condition -> a boolean SQL expression, for the compiled functions.

A field's expression comes from the field table of :mod:`memgov_pg.policy.vocabulary`
(its ``sql``, or the item's column), every value reaches SQL as a quoted literal
(:mod:`memgov_pg.sql_literals`), and the NULL semantics are those the reference
evaluator and :mod:`memgov_pg.policy.satisfiable` assume. :mod:`memgov_pg.compiler`
puts the expressions into the function bodies.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .policy.durations import RelativeTime
from .policy.model import Condition
from .policy.vocabulary import lookup_field
from .sql_literals import literal

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")


def field_sql(field: str) -> str:
    """The SQL expression that reads a field inside a compiled function (the field
    table's ``sql``, or the item's column)."""
    spec = lookup_field(field)
    if spec is None:  # the validator never lets one through
        raise ValueError(f"unknown field {field!r}")
    if spec.metadata_key is not None:
        assert spec.sql is not None
        return spec.sql.format(key=literal(spec.metadata_key))
    if spec.sql is not None:
        return spec.sql
    assert spec.column is not None and _IDENTIFIER.match(spec.column)
    return f"p_item.{spec.column}"


def _value_sql(value: Any) -> str:
    if isinstance(value, RelativeTime):
        return f"(now() - {literal(str(value.ago))}::interval)"
    return literal(value)


_COMPARISON = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def condition_sql(cond: Condition) -> str:
    """One condition as a boolean SQL expression.

    NULL semantics: ``eq``, ``in``, the comparisons, ``contains`` and ``regex``
    are false on NULL; ``neq`` and ``nin`` are true on NULL (a missing value is
    not equal to, nor in, anything); ``eq null`` / ``neq null`` test IS [NOT] NULL.
    """
    expr = field_sql(cond.field)
    op, value = cond.operator, cond.value
    if op in ("eq", "neq") and value is None:
        return f"{expr} IS {'NOT ' if op == 'neq' else ''}NULL"
    if op == "eq" and isinstance(value, bool):
        return expr if value else f"NOT {expr}"
    if op == "eq":
        return f"{expr} = {_value_sql(value)}"
    if op == "neq":
        return f"{expr} IS DISTINCT FROM {_value_sql(value)}"
    if op in ("in", "nin"):
        values = tuple(value)
        non_null = [v for v in values if v is not None]
        members = ", ".join(_value_sql(v) for v in non_null)
        has_null = len(non_null) != len(values)
        if op == "in":
            parts = [f"{expr} IN ({members})"] if non_null else []
            if has_null:
                parts.append(f"{expr} IS NULL")
            return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"
        if has_null:
            return f"({expr} IS NOT NULL AND {expr} NOT IN ({members}))" if non_null else f"{expr} IS NOT NULL"
        return f"({expr} IS NULL OR {expr} NOT IN ({members}))"
    if op in _COMPARISON:
        return f"{expr} {_COMPARISON[op]} {_value_sql(value)}"
    if op == "contains":
        return f"strpos({expr}, {literal(value)}) > 0"
    if op == "regex":
        return f"{expr} ~ {literal(value)}"
    raise ValueError(f"unknown operator {op!r}")


def conditions_sql(conditions: Sequence[Condition], match: str) -> str:
    """The SQL test of ``conditions`` joined by AND (``match == 'all'``) or OR; ``true`` when there are none."""
    if not conditions:
        return "true"
    parts = [condition_sql(c) for c in conditions]
    if len(parts) == 1:
        return parts[0]
    joiner = "\n        AND " if match == "all" else "\n        OR "
    return "(" + joiner.join(parts) + ")"
