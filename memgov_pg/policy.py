"""Policy files: YAML text -> a validated, typed, immutable model.

This module reads a policy (docs/policy.md), reports every mistake in it at once as
``file:line: rule-id: message`` lines, and returns a :class:`Policy` that the
compiler turns into PL/pgSQL. It never writes SQL: values are typed Python
objects (``str``, ``int``, ``Decimal``, ``bool``, ``None``, :class:`RelativeTime`,
aware ``datetime``, or a ``tuple`` of those for ``in``/``nin``), fields come from
the fixed :data:`FIELDS` table, and durations are validated integers.

Public surface (used by the compiler, the deploy code and the CLI):

* :func:`load_policy` -> :class:`Policy` (raises :class:`PolicyValidationError`)
* :func:`validate_policy` -> ``list[PolicyError]`` (errors only)
* :func:`analyze_policy` -> :class:`PolicyReport` (policy or None, errors, warnings)
* the tables :data:`FIELDS`, :data:`OPERATORS`, :data:`OPERATORS_BY_TYPE`,
  :data:`WRITE_ACTIONS`, :data:`RETENTION_ACTIONS`, :data:`ACTION_ALIASES`,
  and :func:`lookup_field` (which also knows ``metadata.<key>``).

The choices made where the specification is silent are listed in
``docs/policy.md``; the short version is in the docstrings below.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal, TypeAlias

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .errors import MemgovError
from .tenants import TENANT_ID_RULE, is_tenant_id
from .tenants import show as show_value

__all__ = [
    "ACTIONS",
    "ACTION_ALIASES",
    "DETECTOR_FIELDS",
    "FIELDS",
    "KNOWN_CATEGORIES",
    "METADATA_KEY_RE",
    "MODES",
    "OPERATORS",
    "OPERATORS_BY_TYPE",
    "RETENTION_ACTIONS",
    "RISK_FIELDS",
    "SOURCES",
    "WRITE_ACTIONS",
    "WRITE_ONLY_FIELDS",
    "Condition",
    "Duration",
    "Feedback",
    "FieldOrigin",
    "FieldSpec",
    "FieldType",
    "Policy",
    "PolicyError",
    "PolicyReport",
    "PolicyValidationError",
    "RegexChecker",
    "RelativeTime",
    "Retention",
    "RiskThresholds",
    "Rule",
    "SourceGrants",
    "analyze_policy",
    "basic_regex_check",
    "default_reason_code",
    "load_policy",
    "lookup_field",
    "parse_duration",
    "parse_time_value",
    "validate_policy",
]

# ---------------------------------------------------------------------------
# Field table
# ---------------------------------------------------------------------------


class FieldType(StrEnum):
    """The type of a policy field; it decides which operators and values fit."""

    ENUM = "enum"
    TEXT = "text"
    NUMERIC = "numeric"
    BOOL = "bool"
    TIMESTAMPTZ = "timestamptz"
    INT = "int"


class FieldOrigin(StrEnum):
    """Where the compiler gets a field's value from."""

    OPERATION = "operation"  # the operation being decided (remember, update, ...)
    ITEM = "item"  # a column of the item / row
    ACTOR = "actor"  # current_user at write time
    DETECTOR = "detector"  # an SQL detector function over fact_text (docs/detectors.md)
    DERIVED = "derived"  # computed from the item (content.length)
    RISK = "risk"  # the risk score function (docs/detectors.md)
    METADATA = "metadata"  # metadata ->> key


@dataclass(frozen=True)
class FieldSpec:
    """One field of the policy language.

    ``column`` is the column of ``memgov.long_term_memory_items`` (= the key of
    the item JSON) the field reads, or ``None`` for computed fields. ``values``
    lists an enum's allowed values; ``minimum``/``maximum`` bound numeric and int
    fields. ``nullable`` fields may be compared with ``null`` (``eq``/``neq``).
    ``retention`` is False for fields that only exist while a write is being
    decided (they cannot be read by ``auto_delete`` rules).
    """

    name: str
    type: FieldType
    origin: FieldOrigin
    column: str | None
    values: tuple[str, ...] | None = None
    minimum: Decimal | None = None
    maximum: Decimal | None = None
    nullable: bool = False
    retention: bool = True
    description: str = ""

    @property
    def operators(self) -> frozenset[str]:
        """The operators that fit this field's type."""
        return OPERATORS_BY_TYPE[self.type]

    @property
    def metadata_key(self) -> str | None:
        """For ``metadata.<key>`` fields, the JSON key; otherwise None."""
        if self.origin is FieldOrigin.METADATA:
            return self.name.split(".", 1)[1]
        return None


SOURCES: Final[tuple[str, ...]] = ("user_confirmed", "agent_extracted", "system_rule")
OPERATION_TYPES: Final[tuple[str, ...]] = ("remember", "update", "forget", "search", "get")
RETENTION_POLICIES: Final[tuple[str, ...]] = (
    "permanent_until_revoked",
    "ttl_7d",
    "ttl_30d",
    "confidence_based",
)
STATUSES: Final[tuple[str, ...]] = ("active", "pending_approval")
RISK_LEVELS: Final[tuple[str, ...]] = ("low", "medium", "high", "critical")
#: Categories the product knows (docs/policy.md, policies/default.yaml). ``category`` stays free text; these
#: only serve the "did you mean" warning for likely typos.
KNOWN_CATEGORIES: Final[tuple[str, ...]] = (
    "user_fact",
    "preference",
    "constraint",
    "project_fact",
    "rule",
    "decision",
    "temporary_context",
    "execution_detail",
    "assumption",
)

_ZERO = Decimal(0)
_ONE = Decimal(1)
_INT4_MAX = 2**31 - 1

_T = FieldType
_O = FieldOrigin
_FIELD_LIST: tuple[FieldSpec, ...] = (
    FieldSpec(
        "operation_type",
        _T.ENUM,
        _O.OPERATION,
        None,
        values=OPERATION_TYPES,
        retention=False,
        description="remember (INSERT), update (UPDATE), forget (DELETE), search, get",
    ),
    FieldSpec("category", _T.TEXT, _O.ITEM, "category", description="the item's category"),
    FieldSpec("fact_text", _T.TEXT, _O.ITEM, "fact_text", description="the memory's text"),
    FieldSpec("source", _T.ENUM, _O.ITEM, "source", values=SOURCES, description="fact source"),
    FieldSpec(
        "retention_policy",
        _T.ENUM,
        _O.ITEM,
        "retention_policy",
        values=RETENTION_POLICIES,
        description="retention policy of the item (docs/retention.md)",
    ),
    FieldSpec("status", _T.ENUM, _O.ITEM, "status", values=STATUSES, description="set by the engine"),
    FieldSpec(
        "confidence",
        _T.NUMERIC,
        _O.ITEM,
        "confidence",
        minimum=_ZERO,
        maximum=_ONE,
        description="0..1",
    ),
    FieldSpec("is_sensitive", _T.BOOL, _O.ITEM, "is_sensitive", description="sensitive flag"),
    FieldSpec("created_at", _T.TIMESTAMPTZ, _O.ITEM, "created_at", description="creation time"),
    FieldSpec(
        "last_confirmed_at",
        _T.TIMESTAMPTZ,
        _O.ITEM,
        "last_confirmed_at",
        nullable=True,
        description="last memgov.confirm (NULL: never confirmed)",
    ),
    FieldSpec("updated_at", _T.TIMESTAMPTZ, _O.ITEM, "updated_at", description="last change"),
    FieldSpec("scope.tenant_id", _T.TEXT, _O.ITEM, "org_id", description="the tenant (org_id)"),
    FieldSpec("scope.project_id", _T.TEXT, _O.ITEM, "project_id", nullable=True),
    FieldSpec("scope.agent_id", _T.TEXT, _O.ITEM, "agent_id", nullable=True),
    FieldSpec("scope.subject_id", _T.TEXT, _O.ITEM, "subject_id", nullable=True),
    FieldSpec("scope.session_id", _T.TEXT, _O.ITEM, "session_id", nullable=True),
    FieldSpec(
        "context.source",
        _T.TEXT,
        _O.ITEM,
        "context_source",
        nullable=True,
        description="integration channel (langgraph, openai_sessions, mcp, custom)",
    ),
    FieldSpec(
        "context.actor",
        _T.TEXT,
        _O.ACTOR,
        None,
        retention=False,
        description="the database role performing the write (current_user)",
    ),
    FieldSpec(
        "content.contains_pii",
        _T.BOOL,
        _O.DETECTOR,
        None,
        description="PII detector over fact_text (docs/detectors.md)",
    ),
    FieldSpec(
        "content.contains_secret",
        _T.BOOL,
        _O.DETECTOR,
        None,
        description="secret detector over fact_text (docs/detectors.md)",
    ),
    FieldSpec(
        "content.length",
        _T.INT,
        _O.DERIVED,
        None,
        minimum=_ZERO,
        maximum=Decimal(_INT4_MAX),
        description="characters of fact_text",
    ),
    FieldSpec(
        "risk_score",
        _T.NUMERIC,
        _O.RISK,
        None,
        minimum=_ZERO,
        maximum=_ONE,
        retention=False,
        description="risk score 0..1 (docs/detectors.md)",
    ),
    FieldSpec(
        "risk_level",
        _T.ENUM,
        _O.RISK,
        None,
        values=RISK_LEVELS,
        retention=False,
        description="risk level from risk_thresholds",
    ),
)
del _T, _O

#: Every fixed field of the policy language (docs/policy.md), by name. ``metadata.<key>`` fields are not in
#: this table (the key is free); :func:`lookup_field` resolves them.
FIELDS: Final[Mapping[str, FieldSpec]] = MappingProxyType({f.name: f for f in _FIELD_LIST})

#: ``metadata.<key>``: letters, digits, ``_ - . :`` (first character a letter,
#: digit or ``_``), at most 128 characters. The whole key after ``metadata.`` is
#: one top-level JSON key (``metadata.a.b`` reads ``metadata ->> 'a.b'``).
METADATA_KEY_RE: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:\-]{0,127}")
METADATA_PREFIX: Final = "metadata."
METADATA_FIELD: Final = FieldSpec(
    "metadata.<key>",
    FieldType.TEXT,
    FieldOrigin.METADATA,
    "metadata",
    nullable=True,
    description="metadata ->> key (text)",
)

DETECTOR_FIELDS: Final[frozenset[str]] = frozenset(f.name for f in _FIELD_LIST if f.origin is FieldOrigin.DETECTOR)
RISK_FIELDS: Final[frozenset[str]] = frozenset(f.name for f in _FIELD_LIST if f.origin is FieldOrigin.RISK)
#: Fields that exist only while a write is decided: not readable by auto_delete.
WRITE_ONLY_FIELDS: Final[frozenset[str]] = frozenset(f.name for f in _FIELD_LIST if not f.retention)

# Names people reach for that are not fields; the hint says what to write.
_FIELD_HINTS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "org_id": "scope.tenant_id",
        "tenant_id": "scope.tenant_id",
        "project_id": "scope.project_id",
        "agent_id": "scope.agent_id",
        "subject_id": "scope.subject_id",
        "session_id": "scope.session_id",
        "context_source": "context.source",
        "actor": "context.actor",
        "operation": "operation_type",
        "contains_pii": "content.contains_pii",
        "contains_secret": "content.contains_secret",
        "length": "content.length",
        "text": "fact_text",
    }
)


def lookup_field(name: str) -> FieldSpec | None:
    """The spec of field ``name`` (fixed fields and ``metadata.<key>``), or None."""
    spec = FIELDS.get(name)
    if spec is not None:
        return spec
    if name.startswith(METADATA_PREFIX):
        key = name[len(METADATA_PREFIX) :]
        if METADATA_KEY_RE.fullmatch(key):
            return dataclasses.replace(METADATA_FIELD, name=name)
    return None


# ---------------------------------------------------------------------------
# Operators and actions
# ---------------------------------------------------------------------------

OPERATORS: Final[tuple[str, ...]] = (
    "eq",
    "neq",
    "in",
    "nin",
    "gt",
    "gte",
    "lt",
    "lte",
    "contains",
    "regex",
)
_ORDERED = frozenset({"gt", "gte", "lt", "lte"})
_EQUALITY = frozenset({"eq", "neq", "in", "nin"})

#: Which operators fit which field type. ``contains`` is a substring test and
#: ``regex`` a PostgreSQL ``~`` match; both on text only. On timestamptz,
#: ``eq``/``neq`` take an absolute timestamp only (a relative time never
#: matches exactly), and ``in``/``nin`` do not apply.
OPERATORS_BY_TYPE: Final[Mapping[FieldType, frozenset[str]]] = MappingProxyType(
    {
        FieldType.ENUM: _EQUALITY,
        FieldType.TEXT: _EQUALITY | {"contains", "regex"},
        FieldType.NUMERIC: _EQUALITY | _ORDERED,
        FieldType.INT: _EQUALITY | _ORDERED,
        FieldType.BOOL: _EQUALITY,
        FieldType.TIMESTAMPTZ: frozenset({"eq", "neq"}) | _ORDERED,
    }
)

_OPERATOR_HINTS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "==": "eq",
        "=": "eq",
        "equals": "eq",
        "is": "eq",
        "!=": "neq",
        "<>": "neq",
        "ne": "neq",
        "not": "neq",
        "not_eq": "neq",
        "not_in": "nin",
        "notin": "nin",
        ">": "gt",
        ">=": "gte",
        "ge": "gte",
        "<": "lt",
        "<=": "lte",
        "le": "lte",
        "~": "regex",
        "matches": "regex",
        "like": "contains",
        "includes": "contains",
    }
)

Action: TypeAlias = Literal["allow", "deny", "require_approval", "quarantine", "auto_delete"]
WriteAction: TypeAlias = Literal["allow", "deny", "require_approval", "quarantine"]
Mode: TypeAlias = Literal["monitor", "enforce", "strict"]

WRITE_ACTIONS: Final[tuple[str, ...]] = ("allow", "deny", "require_approval", "quarantine")
RETENTION_ACTIONS: Final[tuple[str, ...]] = ("auto_delete",)
#: Accepted spellings -> canonical action.
ACTION_ALIASES: Final[Mapping[str, str]] = MappingProxyType(
    {"auto_confirm": "allow", "require_user_approval": "require_approval"}
)
ACTIONS: Final[tuple[str, ...]] = WRITE_ACTIONS + RETENTION_ACTIONS + tuple(ACTION_ALIASES)
MODES: Final[tuple[str, ...]] = ("monitor", "enforce", "strict")

# ---------------------------------------------------------------------------
# Time values and durations
# ---------------------------------------------------------------------------

_UNIT_SECONDS: Final[Mapping[str, int]] = MappingProxyType(
    {"minutes": 60, "hours": 3600, "days": 86400, "weeks": 604800}
)
#: The longest duration accepted anywhere (100 years): keeps ``now() - d``
#: far inside PostgreSQL's timestamptz range.
MAX_DURATION_SECONDS: Final = 36525 * 86400
_DURATION_RE: Final = re.compile(r"\s*(\d+)\s*(minute|hour|day|week)s?\s*", re.IGNORECASE)
_RELATIVE_RE: Final = re.compile(r"\s*now\s*\(\s*\)\s*-\s*(.*?)\s*", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Duration:
    """A validated positive duration: ``amount`` whole ``unit``s.

    ``str(d)`` (e.g. ``"30 days"``) is built from an int and a fixed unit name,
    so it is safe to use as the text of an SQL interval literal.
    """

    amount: int
    unit: Literal["minutes", "hours", "days", "weeks"]

    @property
    def seconds(self) -> int:
        return self.amount * _UNIT_SECONDS[self.unit]

    def __str__(self) -> str:
        return f"{self.amount} {self.unit}"


@dataclass(frozen=True)
class RelativeTime:
    """The instant ``now() - ago``; ``text`` is what the policy file said."""

    ago: Duration
    text: str

    @property
    def seconds(self) -> int:
        return self.ago.seconds

    def __str__(self) -> str:
        return f"now() - {self.ago}"


def parse_duration(text: str) -> Duration:
    """Parse ``"N minutes|hours|days|weeks"`` (singular too, any spacing and case).

    Raises ``ValueError`` with a user-facing message.
    """
    m = _DURATION_RE.fullmatch(text)
    if m is None:
        raise ValueError(f"invalid duration {text!r}: expected 'N minutes', 'N hours', 'N days' or 'N weeks'")
    amount = int(m.group(1))
    unit = m.group(2).lower() + "s"
    if amount <= 0:
        raise ValueError(f"invalid duration {text!r}: must be positive")
    duration = Duration(amount, unit)  # type: ignore[arg-type]
    if duration.seconds > MAX_DURATION_SECONDS:
        raise ValueError(f"invalid duration {text!r}: longer than 100 years")
    return duration


def parse_time_value(text: str) -> RelativeTime:
    """Parse ``"now() - N units"``. Raises ``ValueError`` with a user-facing message."""
    m = _RELATIVE_RE.fullmatch(text)
    if m is None:
        raise ValueError(f'invalid time value {text!r}: expected "now() - N minutes|hours|days|weeks"')
    try:
        return RelativeTime(parse_duration(m.group(1)), text)
    except ValueError as exc:
        raise ValueError(f"invalid time value {text!r}: {_after_colon(str(exc))}") from None


def _after_colon(message: str) -> str:
    return message.split(": ", 1)[1] if ": " in message else message


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------

Scalar: TypeAlias = "str | int | Decimal | bool | dt.datetime | RelativeTime | None"
ConditionValue: TypeAlias = "Scalar | tuple[Scalar, ...]"


@dataclass(frozen=True)
class Condition:
    """``field operator value``.

    ``value`` is typed: ``str`` (text, enum, contains, regex), ``Decimal``
    (numeric), ``int`` (int), ``bool``, ``None`` (``eq``/``neq`` null on a
    nullable field: IS [NOT] NULL), :class:`RelativeTime` or an aware
    ``datetime`` (timestamptz), or a non-empty ``tuple`` of scalars for
    ``in``/``nin``.
    """

    field: str
    operator: str
    value: Any
    line: int

    @property
    def spec(self) -> FieldSpec:
        spec = lookup_field(self.field)
        assert spec is not None, self.field
        return spec

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form (for ``memory_policy_rules.condition`` and explain output)."""
        return {"field": self.field, "operator": self.operator, "value": _json_value(self.value)}


def _json_value(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, RelativeTime):
        return {"older_than": str(value.ago)}
    if isinstance(value, dt.datetime):
        return value.isoformat()
    raise TypeError(f"unexpected condition value {value!r}")


@dataclass(frozen=True)
class Rule:
    """One rule, normalised.

    ``category_scope`` is a tuple of categories the rule is limited to (always
    ANDed with the conditions), or None for every category. ``conditions`` never
    contain the category equality/membership tests that were folded into the
    scope. ``match`` combines ``conditions`` (``all`` = AND, ``any`` = OR).
    ``action`` is canonical; ``action_alias`` is the spelling in the file when it
    was an alias (``auto_confirm``, ``require_user_approval``), else None.
    ``line`` is the 1-based line where the rule starts; ``index_in_file`` its
    0-based position in ``rules:``.
    """

    id: str
    description: str | None
    priority: int
    enabled: bool
    match: Literal["all", "any"]
    category_scope: tuple[str, ...] | None
    conditions: tuple[Condition, ...]
    action: Action
    action_alias: str | None
    reason_codes: tuple[str, ...]
    line: int
    index_in_file: int

    @property
    def is_retention(self) -> bool:
        return self.action == "auto_delete"

    @property
    def is_unconditional(self) -> bool:
        """True when the rule matches every item in its category scope."""
        return not self.conditions

    @property
    def display_action(self) -> str:
        return self.action_alias or self.action

    @property
    def fields_read(self) -> frozenset[str]:
        """The fields the rule reads (``category`` when it has a category scope)."""
        fields = {c.field for c in self.conditions}
        if self.category_scope is not None:
            fields.add("category")
        return frozenset(fields)

    def canonical(self) -> dict[str, Any]:
        """The rule's meaning as JSON (no line numbers, no description)."""
        return {
            "id": self.id,
            "priority": self.priority,
            "enabled": self.enabled,
            "category": list(self.category_scope) if self.category_scope is not None else None,
            "match": self.match,
            "conditions": [c.to_json() for c in self.conditions],
            "action": self.action,
            "reason_codes": list(self.reason_codes),
        }

    def condition_json(self) -> dict[str, Any]:
        """The ``memory_policy_rules.condition`` document: ``{match, conditions}``."""
        return {"match": self.match, "conditions": [c.to_json() for c in self.conditions]}

    @property
    def key(self) -> str:
        """sha256 of :meth:`canonical` without the priority: stays the same across
        policy versions as long as the rule's id and logic do."""
        doc = self.canonical()
        del doc["priority"]
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class RiskThresholds:
    low_max: Decimal = Decimal("0.30")
    medium_max: Decimal = Decimal("0.60")
    high_max: Decimal = Decimal("0.80")


@dataclass(frozen=True)
class Feedback:
    confirm_delta: Decimal = Decimal("0.1")
    reject_delta: Decimal = Decimal("-0.3")
    edit_confidence: Decimal = Decimal("0.8")
    reject_delete_below: Decimal = Decimal("0.0")


@dataclass(frozen=True)
class SourceGrants:
    """Which database roles may claim which fact source; ``"*"`` = every writer."""

    user_confirmed: tuple[str, ...] = ("memgov_reviewer", "memgov_admin")
    system_rule: tuple[str, ...] = ("memgov_admin",)
    agent_extracted: tuple[str, ...] = ("*",)

    def roles_for(self, source: str) -> tuple[str, ...]:
        if source not in SOURCES:
            raise KeyError(source)
        roles: tuple[str, ...] = getattr(self, source)
        return roles


@dataclass(frozen=True)
class Retention:
    schedule: str = "*/10 * * * *"
    batch_size: int = 5000
    confidence_floor: Decimal = Decimal("0.3")
    confidence_grace: Duration = Duration(30, "days")
    approval_ttl: Duration = Duration(7, "days")


@dataclass(frozen=True)
class PolicyError:
    """One finding. ``str()`` is ``file:line: rule-id: message``.

    ``rule_id`` is ``-`` outside a rule, and ``rules[N]`` (0-based) for a rule
    whose id is missing or invalid. Warnings have ``severity == "warning"`` and
    print as ``file:line: rule-id: warning: message``.
    """

    file: str
    line: int
    rule_id: str
    message: str
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        prefix = "warning: " if self.severity == "warning" else ""
        return f"{self.file}:{self.line}: {self.rule_id}: {prefix}{self.message}"


class PolicyValidationError(MemgovError, ValueError):
    """A policy file has errors; ``.errors`` lists all of them (file order)."""

    def __init__(self, errors: Sequence[PolicyError]) -> None:
        self.errors: tuple[PolicyError, ...] = tuple(errors)
        super().__init__("\n".join(str(e) for e in self.errors))

    # the error names file, line and rule id (of the first error).
    @property
    def file(self) -> str | None:
        return self.errors[0].file if self.errors else None

    @property
    def line(self) -> int | None:
        return self.errors[0].line if self.errors else None

    @property
    def rule_id(self) -> str | None:
        return self.errors[0].rule_id if self.errors else None


@dataclass(frozen=True)
class Policy:
    """A validated policy. ``rules`` are in evaluation order (priority, then file
    order); disabled rules are kept (``enabled=False``) and compiled out."""

    version: str
    mode: Mode
    on_policy_miss: WriteAction
    risk_thresholds: RiskThresholds
    feedback: Feedback
    sources: SourceGrants
    retention: Retention
    rules: tuple[Rule, ...]
    source_path: Path | None
    sha256: str
    warnings: tuple[PolicyError, ...]
    description: str | None = None
    source_text: str = dataclasses.field(default="", repr=False)

    @property
    def write_rules(self) -> tuple[Rule, ...]:
        """Enabled write-time rules, in evaluation order (first match wins)."""
        return tuple(r for r in self.rules if r.enabled and not r.is_retention)

    @property
    def retention_rules(self) -> tuple[Rule, ...]:
        """Enabled ``auto_delete`` rules (predicates of the retention sweep)."""
        return tuple(r for r in self.rules if r.enabled and r.is_retention)

    @property
    def fields_read(self) -> frozenset[str]:
        """Fields the write rules read (what strict mode requires to be non-NULL)."""
        out: set[str] = set()
        for rule in self.write_rules:
            out |= rule.fields_read
        return frozenset(out)

    @property
    def retention_fields_read(self) -> frozenset[str]:
        out: set[str] = set()
        for rule in self.retention_rules:
            out |= rule.fields_read
        return frozenset(out)

    @property
    def needs_detectors(self) -> bool:
        """Whether write decisions need the detectors: a detector field is read,
        or a risk field is (the risk score adds the PII and secret factors)."""
        return bool(self.fields_read & (DETECTOR_FIELDS | RISK_FIELDS))

    @property
    def needs_risk(self) -> bool:
        return bool(self.fields_read & RISK_FIELDS)

    def rule(self, rule_id: str) -> Rule:
        for r in self.rules:
            if r.id == rule_id:
                return r
        raise KeyError(rule_id)


@dataclass(frozen=True)
class PolicyReport:
    """The outcome of :func:`analyze_policy`: ``policy`` is None when there are errors."""

    policy: Policy | None
    errors: tuple[PolicyError, ...]
    warnings: tuple[PolicyError, ...]

    @property
    def ok(self) -> bool:
        return not self.errors


#: ``regex_checker(pattern)`` returns None when the pattern is valid, else the
#: reason (e.g. PostgreSQL's error message).
RegexChecker: TypeAlias = Callable[[str], "str | None"]


def default_reason_code(rule_id: str) -> str:
    """The reason code of a rule without ``reason_codes``: its id upper-cased, each
    run of characters other than A-Z and 0-9 turned into one ``_`` (``RULE`` if
    nothing is left). ``block-secrets`` -> ``BLOCK_SECRETS``."""
    code = re.sub(r"[^A-Z0-9]+", "_", rule_id.upper()).strip("_")
    return code or "RULE"


# Python's ``re`` and PostgreSQL's ARE flavour differ (``\y``, ``(?P<n>)``, ...),
# so offline only structural mistakes that both flavours reject are reported.
_STRUCTURAL_REGEX_ERRORS: Final = (
    "missing ), unterminated subpattern",
    "unbalanced parenthesis",
    "unterminated character set",
    "nothing to repeat",
    "multiple repeat",
    "min repeat greater than max repeat",
    "bad character range",
)


#: The longest regex a policy may hold: patterns run on every governed write.
MAX_REGEX_LENGTH: Final = 512


def regex_cost_problem(pattern: str) -> str | None:
    """Why a pattern could make a write slow, or None.

    PostgreSQL matches a pattern without backreferences in time linear in the
    text; a backreference (``\\1`` .. ``\\9`` outside a bracket expression) makes
    it backtrack, exponentially in the worst case (``(.+)\\1\\1x`` took a minute
    on 2,000 characters). Both are refused whatever database checks the rest.
    """
    if len(pattern) > MAX_REGEX_LENGTH:
        return f"longer than {MAX_REGEX_LENGTH} characters"
    in_bracket = False
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            if not in_bracket and pattern[i + 1] in "123456789":
                return "backreferences (\\1 ... \\9) are not allowed: they can take exponential time"
            i += 2
            continue
        if c == "[" and not in_bracket:
            in_bracket = True
            # a ] right after [ or [^ is a literal member
            if pattern[i + 1 : i + 2] == "^":
                i += 1
            if pattern[i + 1 : i + 2] == "]":
                i += 1
        elif c == "]" and in_bracket:
            in_bracket = False
        i += 1
    return None


def basic_regex_check(pattern: str) -> str | None:
    """The offline regex check used when no ``regex_checker`` is given.

    Reports only mistakes that PostgreSQL would reject too (unbalanced
    parentheses or brackets, a quantifier with nothing to repeat, a reversed
    range); everything else is left to PostgreSQL, which checks every pattern
    when the policy is compiled against a database.
    """
    try:
        re.compile(pattern)
    except re.error as exc:
        if any(exc.msg.startswith(s) for s in _STRUCTURAL_REGEX_ERRORS):
            return str(exc)
    except (OverflowError, RecursionError) as exc:  # pragma: no cover - pathological
        return str(exc)
    return None


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------

PolicySource: TypeAlias = "str | bytes | os.PathLike[str]"


def load_policy(
    source: PolicySource,
    *,
    filename: str | None = None,
    regex_checker: RegexChecker | None = None,
) -> Policy:
    """Load and validate a policy; raise :class:`PolicyValidationError` with
    every error of the file.

    ``source`` is a path (``os.PathLike``, or a ``str`` without a newline that
    ends in ``.yaml``/``.yml``/``.json`` or names an existing file), YAML text
    (any other ``str``), or the file's bytes. ``filename`` is what error lines
    show (default: the path, or ``<string>``). ``regex_checker`` validates each
    ``regex`` pattern (the compiler passes one that asks PostgreSQL); without
    it, :func:`basic_regex_check` is used.
    """
    report = analyze_policy(source, filename=filename, regex_checker=regex_checker)
    if report.policy is None:
        raise PolicyValidationError(report.errors)
    return report.policy


def validate_policy(
    source: PolicySource,
    *,
    filename: str | None = None,
    regex_checker: RegexChecker | None = None,
) -> list[PolicyError]:
    """Every error of the policy (empty when valid); warnings are not included."""
    return list(analyze_policy(source, filename=filename, regex_checker=regex_checker).errors)


def analyze_policy(
    source: PolicySource,
    *,
    filename: str | None = None,
    regex_checker: RegexChecker | None = None,
) -> PolicyReport:
    """Parse and validate; return the policy (or None), all errors and all warnings."""
    path: Path | None = None
    if isinstance(source, bytes):
        raw = source
        display = filename or "<string>"
    elif isinstance(source, str) and not _looks_like_path(source):
        raw = source.encode("utf-8")
        display = filename or "<string>"
    else:
        path = Path(source)
        display = filename or str(source)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            reason = exc.strerror or str(exc)
            err = PolicyError(display, 1, "-", f"cannot read the policy file: {reason}")
            return PolicyReport(None, (err,), ())
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        err = PolicyError(display, line, "-", "the policy file is not valid UTF-8")
        return PolicyReport(None, (err,), ())
    parser = _Parser(display, regex_checker or basic_regex_check)
    policy = parser.parse(text, raw, path)
    errors = tuple(sorted(parser.errors, key=_error_order))
    warnings = tuple(sorted(parser.warnings, key=_error_order))
    if errors:
        return PolicyReport(None, errors, warnings)
    assert policy is not None
    policy = dataclasses.replace(policy, warnings=warnings)
    return PolicyReport(policy, errors, warnings)


def _error_order(e: PolicyError) -> int:
    return e.line


def _looks_like_path(text: str) -> bool:
    if "\n" in text or not text.strip():
        return False
    if text.lower().endswith((".yaml", ".yml", ".json")):
        return True
    try:
        return os.path.isfile(text)
    except (OSError, ValueError):
        return False


# ---------------------------------------------------------------------------
# The parser (PyYAML node API: every node knows its line)
# ---------------------------------------------------------------------------

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MERGE = "tag:yaml.org,2002:merge"

_TOP_KEYS = (
    "version",
    "description",
    "mode",
    "defaults",
    "risk_thresholds",
    "feedback",
    "sources",
    "retention",
    "rules",
)
_RULE_KEYS = (
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
_WHEN_KEYS = ("field", "operator", "value")
_SEMVER_RE: Final = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
    r"(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)
_CRON_FIELD_RE: Final = re.compile(r"[0-9A-Za-z*,/\-]+")
_CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f]")
_MAX_ID = 200
_MAX_ROLE = 63  # PostgreSQL NAMEDATALEN - 1
_INVALID: Final = object()


def _one_line(text: str) -> str:
    """Messages quote user text: keep each finding on one line."""
    return _CONTROL_RE.sub(lambda m: repr(m.group())[1:-1], text)


def _peek_id(node: Node) -> str | None:
    """The rule's id as written (a string scalar), without validating it."""
    if isinstance(node, MappingNode):
        for key_node, value_node in node.value:
            if (
                isinstance(key_node, ScalarNode)
                and key_node.tag == _STR
                and key_node.value == "id"
                and isinstance(value_node, ScalarNode)
                and value_node.tag == _STR
            ):
                value: str = value_node.value
                return value
    return None


def _line(node: Node) -> int:
    return node.start_mark.line + 1


def _kind(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    return {
        _STR: "a string",
        _INT: "an integer",
        _FLOAT: "a number",
        _BOOL: "a boolean",
        _NULL: "null",
        _TIMESTAMP: "a timestamp",
    }.get(node.tag, f"a value tagged {node.tag}")


def _show(node: Node) -> str:
    if isinstance(node, ScalarNode):
        if node.tag == _STR:
            return repr(node.value)
        return f"{_kind(node)} ({node.value})" if node.tag != _NULL else "null"
    return _kind(node)


def _hint(word: str, candidates: Iterable[str], extra: Mapping[str, str] | None = None) -> str:
    if extra and word in extra:
        return f" (did you mean '{extra[word]}'?)"
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _one_of(values: Iterable[str]) -> str:
    return ", ".join(values)


class _Parser:
    def __init__(self, filename: str, regex_checker: RegexChecker) -> None:
        self.file = filename
        self.regex_checker = regex_checker
        self.errors: list[PolicyError] = []
        self.warnings: list[PolicyError] = []
        self._constructor = SafeConstructor()

    # -- reporting ----------------------------------------------------------

    def error(self, where: Node | int, rule_id: str, message: str) -> None:
        line = where if isinstance(where, int) else _line(where)
        self.errors.append(PolicyError(self.file, line, _one_line(rule_id), _one_line(message)))

    def warn(self, where: Node | int, rule_id: str, message: str) -> None:
        line = where if isinstance(where, int) else _line(where)
        self.warnings.append(PolicyError(self.file, line, _one_line(rule_id), _one_line(message), "warning"))

    # -- generic node helpers -----------------------------------------------

    def mapping(
        self,
        node: Node,
        rid: str,
        what: str,
        allowed: Sequence[str] | None,
        required: Sequence[str] = (),
    ) -> dict[str, tuple[ScalarNode, Node]] | None:
        """The string-keyed items of a mapping node; reports non-mappings, bad and
        duplicate keys, unknown keys (with a hint) and missing required keys."""
        if not isinstance(node, MappingNode):
            self.error(node, rid, f"{what} must be a mapping, got {_show(node)}")
            return None
        items: dict[str, tuple[ScalarNode, Node]] = {}
        merged = False
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                self.error(key_node, rid, "YAML merge keys ('<<') are not supported")
                merged = True
                continue
            if not isinstance(key_node, ScalarNode) or key_node.tag != _STR:
                self.error(
                    key_node,
                    rid,
                    f"keys of {what} must be strings, got {_show(key_node)} (quote it)",
                )
                continue
            key = key_node.value
            if key in items:
                first = _line(items[key][0])
                self.error(key_node, rid, f"duplicate key '{key}' in {what} (first at line {first})")
                continue
            if allowed is not None and key not in allowed:
                self.error(key_node, rid, f"unknown key '{key}' in {what}{_hint(key, allowed)}")
                continue
            items[key] = (key_node, value_node)
        for key in required:
            if key not in items and not merged:
                self.error(node, rid, f"missing required key '{key}' in {what}")
        return items

    def string(self, node: Node, rid: str, what: str, *, allow_empty: bool = False) -> str | None:
        if not isinstance(node, ScalarNode) or node.tag != _STR:
            self.error(node, rid, f"{what} must be a string, got {_show(node)}")
            return None
        value: str = node.value
        if "\x00" in value:
            self.error(node, rid, f"{what} must not contain a NUL character")
            return None
        if not allow_empty and not value:
            self.error(node, rid, f"{what} must not be empty")
            return None
        return value

    def label(self, node: Node, rid: str, what: str, max_len: int = _MAX_ID) -> str | None:
        """A one-line name (rule id, reason code, category, role): any printable
        text, quotes and SQL punctuation included, without surrounding spaces."""
        value = self.string(node, rid, what)
        if value is None:
            return None
        if _CONTROL_RE.search(value):
            self.error(node, rid, f"{what} must not contain control characters or newlines")
            return None
        if value != value.strip():
            self.error(node, rid, f"{what} must not start or end with spaces")
            return None
        if len(value) > max_len:
            self.error(node, rid, f"{what} is longer than {max_len} characters")
            return None
        return value

    def choice(
        self,
        node: Node,
        rid: str,
        what: str,
        values: Sequence[str],
        hints: Mapping[str, str] | None = None,
    ) -> str | None:
        if not isinstance(node, ScalarNode) or node.tag != _STR:
            self.error(node, rid, f"{what} must be one of {_one_of(values)}; got {_show(node)}")
            return None
        value: str = node.value
        if value not in values:
            self.error(
                node,
                rid,
                f"unknown {what} '{value}'{_hint(value, values, hints)}; expected one of {_one_of(values)}",
            )
            return None
        return value

    def boolean(self, node: Node, rid: str, what: str) -> bool | None:
        if not isinstance(node, ScalarNode) or node.tag != _BOOL:
            self.error(node, rid, f"{what} must be true or false, got {_show(node)}")
            return None
        return bool(self._constructor.construct_yaml_bool(node))

    def integer(self, node: Node, rid: str, what: str, lo: int = -_INT4_MAX - 1, hi: int = _INT4_MAX) -> int | None:
        if not isinstance(node, ScalarNode) or node.tag != _INT:
            self.error(node, rid, f"{what} must be an integer, got {_show(node)}")
            return None
        value = int(self._constructor.construct_yaml_int(node))
        if not lo <= value <= hi:
            self.error(node, rid, f"{what} must be between {lo} and {hi}, got {value}")
            return None
        return value

    def number(self, node: Node, rid: str, what: str, lo: Decimal | None, hi: Decimal | None) -> Decimal | None:
        if not isinstance(node, ScalarNode) or node.tag not in (_INT, _FLOAT):
            self.error(node, rid, f"{what} must be a number, got {_show(node)}")
            return None
        if node.tag == _INT:
            value = Decimal(int(self._constructor.construct_yaml_int(node)))
        else:
            try:
                value = Decimal(node.value.replace("_", ""))
            except InvalidOperation:
                value = Decimal("NaN")
            if not value.is_finite():
                self.error(node, rid, f"{what} must be a finite number, got {node.value}")
                return None
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            self.error(node, rid, f"{what} must be between {lo} and {hi}, got {node.value}")
            return None
        return value

    def duration(self, node: Node, rid: str, what: str) -> Duration | None:
        text = self.string(node, rid, what)
        if text is None:
            return None
        try:
            return parse_duration(text)
        except ValueError as exc:
            self.error(node, rid, f"{what}: {exc}")
            return None

    # -- top level ----------------------------------------------------------

    def parse(self, text: str, raw: bytes, path: Path | None) -> Policy | None:
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else 1
            problem = exc.problem or exc.context or "cannot parse"
            if exc.context and exc.problem:
                problem = f"{exc.context}: {exc.problem}"
            self.error(line, "-", f"invalid YAML: {problem}")
            return None
        except yaml.YAMLError as exc:
            self.error(1, "-", f"invalid YAML: {exc}")
            return None
        if root is None:
            self.error(1, "-", "the policy file is empty")
            return None
        if not isinstance(root, MappingNode):
            self.error(root, "-", f"the top level of a policy must be a mapping, got {_show(root)}")
            return None
        top = self.mapping(root, "-", "the policy", _TOP_KEYS, required=("version",))
        if top is None:
            return None

        version = None
        if "version" in top:
            version = self.version(top["version"][1])
        description = None
        if "description" in top:
            description = self.string(top["description"][1], "-", "description", allow_empty=True)
        mode: str | None = "enforce"
        if "mode" in top:
            mode = self.choice(top["mode"][1], "-", "mode", MODES)
        on_miss = self.defaults(top.get("defaults"))
        thresholds = self.risk_thresholds(top.get("risk_thresholds"))
        feedback = self.feedback(top.get("feedback"))
        sources = self.sources(top.get("sources"))
        retention = self.retention(top.get("retention"))
        rules = self.rules(top.get("rules"), root)

        if (
            self.errors
            or version is None
            or mode is None
            or on_miss is None
            or thresholds is None
            or feedback is None
            or sources is None
            or retention is None
        ):
            return None
        return Policy(
            version=version,
            mode=mode,  # type: ignore[arg-type]
            on_policy_miss=on_miss,  # type: ignore[arg-type]
            risk_thresholds=thresholds,
            feedback=feedback,
            sources=sources,
            retention=retention,
            rules=rules,
            source_path=path,
            sha256=hashlib.sha256(raw).hexdigest(),
            warnings=(),
            description=description,
            source_text=text,
        )

    def version(self, node: Node) -> str | None:
        if not isinstance(node, ScalarNode) or node.tag != _STR:
            self.error(
                node,
                "-",
                f'version must be a quoted semver string like "1.2.0", got {_show(node)}',
            )
            return None
        value: str = node.value
        if not _SEMVER_RE.fullmatch(value):
            self.error(node, "-", f"version '{value}' is not a semver version (like 1.2.0)")
            return None
        return value

    def optional_section(
        self, item: tuple[ScalarNode, Node] | None, what: str, allowed: Sequence[str]
    ) -> dict[str, tuple[ScalarNode, Node]] | None:
        """An optional mapping section; absent or null -> {} (all defaults)."""
        if item is None:
            return {}
        node = item[1]
        if isinstance(node, ScalarNode) and node.tag == _NULL:
            return {}
        return self.mapping(node, "-", what, allowed)

    def defaults(self, item: tuple[ScalarNode, Node] | None) -> str | None:
        section = self.optional_section(item, "defaults", ("on_policy_miss",))
        if section is None:
            return None
        if "on_policy_miss" not in section:
            return "require_approval"
        node = section["on_policy_miss"][1]
        if isinstance(node, ScalarNode) and node.tag == _STR and node.value == "auto_delete":
            self.error(node, "-", "on_policy_miss must be a write action, not auto_delete")
            return None
        choices = WRITE_ACTIONS + tuple(ACTION_ALIASES)
        value = self.choice(node, "-", "on_policy_miss action", choices)
        return None if value is None else ACTION_ALIASES.get(value, value)

    def risk_thresholds(self, item: tuple[ScalarNode, Node] | None) -> RiskThresholds | None:
        names = ("low_max", "medium_max", "high_max")
        section = self.optional_section(item, "risk_thresholds", names)
        if section is None:
            return None
        default = RiskThresholds()
        values: dict[str, Decimal] = {}
        ok = True
        for name in names:
            if name in section:
                v = self.number(section[name][1], "-", f"risk_thresholds.{name}", _ZERO, _ONE)
                if v is None:
                    ok = False
                    continue
                values[name] = v
        if not ok:
            return None
        result = dataclasses.replace(default, **values)
        if not result.low_max < result.medium_max < result.high_max:
            where = item[0] if item is not None else 1
            self.error(
                where,
                "-",
                "risk_thresholds must increase: low_max < medium_max < high_max"
                f" (got {result.low_max}, {result.medium_max}, {result.high_max})",
            )
            return None
        return result

    def feedback(self, item: tuple[ScalarNode, Node] | None) -> Feedback | None:
        bounds = {
            "confirm_delta": (_ZERO, _ONE),
            "reject_delta": (-_ONE, _ZERO),
            "edit_confidence": (_ZERO, _ONE),
            "reject_delete_below": (_ZERO, _ONE),
        }
        section = self.optional_section(item, "feedback", tuple(bounds))
        if section is None:
            return None
        values: dict[str, Decimal] = {}
        ok = True
        for name, (lo, hi) in bounds.items():
            if name in section:
                v = self.number(section[name][1], "-", f"feedback.{name}", lo, hi)
                if v is None:
                    ok = False
                else:
                    values[name] = v
        return dataclasses.replace(Feedback(), **values) if ok else None

    def sources(self, item: tuple[ScalarNode, Node] | None) -> SourceGrants | None:
        section = self.optional_section(item, "sources", SOURCES)
        if section is None:
            return None
        values: dict[str, tuple[str, ...]] = {}
        ok = True
        for name in SOURCES:
            if name not in section:
                continue
            node = section[name][1]
            if not isinstance(node, SequenceNode):
                self.error(node, "-", f"sources.{name} must be a list of roles, got {_show(node)}")
                ok = False
                continue
            roles: list[str] = []
            for role_node in node.value:
                role = self.label(role_node, "-", f"a role in sources.{name}", _MAX_ROLE)
                if role is None:
                    ok = False
                elif role not in roles:
                    roles.append(role)
            values[name] = tuple(roles)
        return dataclasses.replace(SourceGrants(), **values) if ok else None

    def retention(self, item: tuple[ScalarNode, Node] | None) -> Retention | None:
        names = ("schedule", "batch_size", "confidence_floor", "confidence_grace", "approval_ttl")
        section = self.optional_section(item, "retention", names)
        if section is None:
            return None
        values: dict[str, Any] = {}
        ok = True

        def put(name: str, value: Any) -> None:
            nonlocal ok
            if value is None:
                ok = False
            else:
                values[name] = value

        if "schedule" in section:
            put("schedule", self.cron(section["schedule"][1]))
        if "batch_size" in section:
            put(
                "batch_size",
                self.integer(section["batch_size"][1], "-", "retention.batch_size", 1, 1_000_000),
            )
        if "confidence_floor" in section:
            node = section["confidence_floor"][1]
            put(
                "confidence_floor",
                self.number(node, "-", "retention.confidence_floor", _ZERO, _ONE),
            )
        for name in ("confidence_grace", "approval_ttl"):
            if name in section:
                put(name, self.duration(section[name][1], "-", f"retention.{name}"))
        return dataclasses.replace(Retention(), **values) if ok else None

    def cron(self, node: Node) -> str | None:
        text = self.string(node, "-", "retention.schedule")
        if text is None:
            return None
        value = " ".join(text.split())
        fields = value.split(" ")
        # pg_cron 1.4 takes five fields; its 'N seconds' schedules came with 1.5
        if len(fields) == 5 and all(_CRON_FIELD_RE.fullmatch(f) for f in fields):
            return value
        self.error(
            node,
            "-",
            f"retention.schedule '{text}' is not a pg_cron schedule: expected five cron fields"
            " (minute hour day-of-month month day-of-week, GMT)",
        )
        return None

    # -- rules --------------------------------------------------------------

    def rules(self, item: tuple[ScalarNode, Node] | None, root: Node) -> tuple[Rule, ...]:
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
        items = self.mapping(node, rid, "rule", _RULE_KEYS, required=("id", "priority", "action"))
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

    def check_category_name(self, node: Node, rid: str, value: str) -> None:
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
        if not isinstance(node, SequenceNode):
            self.error(node, rid, f"when must be a list of conditions, got {_show(node)}")
            return []
        if not node.value:
            self.error(node, rid, "when must not be an empty list (omit it instead)")
            return []
        out: list[Condition] = []
        for item in node.value:
            entry = self.mapping(item, rid, "condition", _WHEN_KEYS, required=_WHEN_KEYS)
            if entry is None or any(k not in entry for k in _WHEN_KEYS):
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
        self.error(node, rid, f"unknown field '{name}'{_hint(name, FIELDS, _FIELD_HINTS)}")
        return None

    def operator(self, node: Node, rid: str) -> str | None:
        if not isinstance(node, ScalarNode) or node.tag != _STR:
            self.error(node, rid, f"an operator must be a string, got {_show(node)}")
            return None
        op: str = node.value
        if op not in OPERATORS:
            self.error(
                node,
                rid,
                f"unknown operator '{op}'{_hint(op, OPERATORS, _OPERATOR_HINTS)}; expected one of {_one_of(OPERATORS)}",
            )
            return None
        return op

    def operator_fits(self, node: Node, rid: str, spec: FieldSpec, op: str) -> bool:
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
            lo = int(spec.minimum) if spec.minimum is not None else -_INT4_MAX - 1
            hi = int(spec.maximum) if spec.maximum is not None else _INT4_MAX
            integer = self.integer(node, rid, name, lo, hi)
            return _INVALID if integer is None else integer
        raise AssertionError(spec.type)  # pragma: no cover

    def time_value(self, spec: FieldSpec, op: str, node: Node, rid: str) -> Any:
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
            if _RELATIVE_RE.fullmatch(text):
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
        if not isinstance(value, dt.datetime) or value.tzinfo is None:
            self.error(
                node,
                rid,
                f"timestamp {node.value!r} needs a time and a UTC offset (e.g. 2025-01-31T00:00:00Z)",
            )
            return _INVALID
        return value

    # -- whole-policy checks ------------------------------------------------

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
