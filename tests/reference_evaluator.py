"""A reference evaluator for the compiler's property test (tests only).

It decides a write the slow, obvious way, straight from a validated
:class:`~memgov_pg.policy.Policy`: take the enabled write rules in order of
(priority, position in the file), return the first one whose category scope
and conditions hold, else the miss. It shares nothing with
``memgov_pg.compiler`` (and must never import it): the property test
(``tests/db/test_compiler_property.py``) compares what the two say.

Semantics, from docs/policy.md:

* A condition on a NULL value: ``neq`` and ``nin`` are true, every other
  operator is false; ``eq null`` / ``neq null`` test for NULL.
* ``match: all`` needs every condition, ``match: any`` one; no condition at
  all matches. The category scope is always ANDed; a NULL category is in no
  scope.
* Relative times (``now() - N units``, ``older_than``) are ``now`` minus the
  duration, ``now`` being the transaction time the database used.
* ``sources:``: a write claims the source of its row (``remember``, ``update``,
  ``forget``); when the actor is a member of none of the roles the policy grants
  that source (``"*"``: every role), the write is denied with SOURCE_NOT_PERMITTED
  before anything else. A read (``search``, ``get``) claims no source: the rules
  alone decide it.
* ``strict``: if any field read by an enabled write rule is NULL, the write
  is denied with STRICT_INCOMPLETE before any rule runs; a miss is always
  ``deny``. ``monitor`` reports the action with ``enforced: false``.

Out of scope, by design: the content detectors and the risk score (tested by
their own corpora). Role membership is the caller's ``member_of``. Regex patterns
are run with Python's ``re``: callers keep to patterns on which PostgreSQL's ARE
flavour agrees.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from typing import Any

from memgov_pg.policy import Condition, Policy, RelativeTime, Rule

#: The operations that claim the source of their row; a read (search, get) claims none.
CLAIMING_OPERATIONS = frozenset({"remember", "update", "forget"})

#: Policy field -> the item key (column of memgov.long_term_memory_items) it reads.
ITEM_KEYS: Mapping[str, str] = {
    "category": "category",
    "fact_text": "fact_text",
    "source": "source",
    "retention_policy": "retention_policy",
    "status": "status",
    "confidence": "confidence",
    "is_sensitive": "is_sensitive",
    "created_at": "created_at",
    "last_confirmed_at": "last_confirmed_at",
    "updated_at": "updated_at",
    "scope.tenant_id": "org_id",
    "scope.project_id": "project_id",
    "scope.agent_id": "agent_id",
    "scope.subject_id": "subject_id",
    "scope.session_id": "session_id",
    "context.source": "context_source",
    "store.namespace": "namespace",
    "store.key": "item_key",
}
UNSUPPORTED = frozenset(
    {
        "content.contains_pii",
        "content.contains_secret",
        "content.contains_iban",
        "content.contains_ip_address",
        "risk_score",
        "risk_level",
    }
)


def item_defaults(now: dt.datetime) -> dict[str, Any]:
    """The values an evaluated JSON item gets for the keys it leaves out
    (the table's defaults; every other missing key is NULL)."""
    return {
        "is_sensitive": False,
        "retention_policy": "permanent_until_revoked",
        "metadata": {},
        "status": "active",
        "created_at": now,
        "updated_at": now,
    }


def metadata_text(metadata: Any, key: str) -> str | None:
    """``metadata ->> key`` for the JSON values the property test generates."""
    if not isinstance(metadata, dict) or key not in metadata:
        return None
    value = metadata[key]
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    raise TypeError(f"no reference ->> for metadata value {value!r}")


def field_value(field: str, row: Mapping[str, Any], operation: str, actor: str) -> Any:
    """The value of ``field`` for the row (keys absent from ``row`` are NULL)."""
    if field == "operation_type":
        return operation
    if field == "context.actor":
        return actor
    if field == "content.length":
        text = row.get("fact_text")
        return None if text is None else len(text)
    if field.startswith("metadata."):
        return metadata_text(row.get("metadata"), field[len("metadata.") :])
    if field in UNSUPPORTED:
        raise NotImplementedError(f"the reference evaluator does not compute {field}")
    return row.get(ITEM_KEYS[field])


def _resolve(value: Any, now: dt.datetime) -> Any:
    if isinstance(value, RelativeTime):
        return now - dt.timedelta(seconds=value.seconds)
    return value


def condition_holds(cond: Condition, value: Any, now: dt.datetime) -> bool:
    op, want = cond.operator, cond.value
    if want is None:
        return value is None if op == "eq" else value is not None
    if value is None:
        return op in ("neq", "nin")
    want = tuple(_resolve(v, now) for v in want) if isinstance(want, tuple) else _resolve(want, now)
    if op == "eq":
        return bool(value == want)
    if op == "neq":
        return bool(value != want)
    if op == "in":
        return value in want
    if op == "nin":
        return value not in want
    if op == "gt":
        return bool(value > want)
    if op == "gte":
        return bool(value >= want)
    if op == "lt":
        return bool(value < want)
    if op == "lte":
        return bool(value <= want)
    if op == "contains":
        return str(want) in value
    if op == "regex":
        return re.search(str(want), value) is not None
    raise ValueError(f"unknown operator {op!r}")


def rule_fields(rule: Rule) -> set[str]:
    fields = {c.field for c in rule.conditions}
    if rule.category_scope is not None:
        fields.add("category")
    return fields


def rule_matches(rule: Rule, row: Mapping[str, Any], operation: str, actor: str, now: dt.datetime) -> bool:
    if rule.category_scope is not None and row.get("category") not in rule.category_scope:
        return False
    results = [condition_holds(c, field_value(c.field, row, operation, actor), now) for c in rule.conditions]
    if not results:
        return True
    return all(results) if rule.match == "all" else any(results)


def write_rules(policy: Policy) -> list[Rule]:
    """The rules that decide writes, in the order they are tried."""
    return sorted(
        (r for r in policy.rules if r.enabled and r.action != "auto_delete"),
        key=lambda r: (r.priority, r.index_in_file),
    )


def evaluate(
    policy: Policy,
    row: Mapping[str, Any],
    operation: str,
    *,
    actor: str,
    now: dt.datetime,
    member_of: Callable[[str], bool],
) -> dict[str, Any]:
    """The decision for ``row`` (the item with its defaults applied, Python
    values: ``Decimal`` confidence, aware ``datetime`` times, ``dict`` metadata),
    taken for ``actor``, a member of the roles for which ``member_of`` says so."""
    rules = write_rules(policy)

    def decision(action: str, reason_codes: list[str], rule_ids: list[str]) -> dict[str, Any]:
        return {
            "action": action,
            "reason_codes": reason_codes,
            "matched_rule_ids": rule_ids,
            "policy_version": policy.version,
            "mode": policy.mode,
            "enforced": policy.mode != "monitor",
        }

    source = row.get("source")
    if operation in CLAIMING_OPERATIONS and source is not None:
        roles = policy.sources.roles_for(source)
        if "*" not in roles and not any(member_of(role) for role in roles):
            return decision("deny", ["SOURCE_NOT_PERMITTED"], [])
    if policy.mode == "strict":
        needed = set().union(*(rule_fields(r) for r in rules)) if rules else set()
        if any(field_value(f, row, operation, actor) is None for f in sorted(needed)):
            return decision("deny", ["STRICT_INCOMPLETE"], [])
    for rule in rules:
        if rule_matches(rule, row, operation, actor, now):
            return decision(rule.action, list(rule.reason_codes), [rule.id])
    miss = "deny" if policy.mode == "strict" else policy.on_policy_miss
    return decision(miss, ["DEFAULT_POLICY"], [])
