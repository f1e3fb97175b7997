"""The vocabulary of the policy language: fields, operators, actions, modes,
the enumerations (operations, sources, statuses, retention kinds, risk levels)
and the values computed before the rules run (detectors, the risk score).

This is the one table the rest reads: the reader checks policies against it,
the compiler takes each field's SQL expression and what it needs computed
first from it, the JSON schema for editors is generated from it, and a test
compares the enumerations with the CHECK constraints of the SQL schema.

Adding a field is one :class:`FieldSpec` row in ``_FIELD_LIST``; adding a
detector is one :class:`Computed` row in ``_COMPUTED_LIST`` (plus the field
row that reads its variable).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from types import MappingProxyType
from typing import Final, Literal, TypeAlias

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
class Computed:
    """A value a compiled function computes once, before the rules, when a field
    it reads needs it: a detector over ``fact_text``, or the risk score.

    ``variables`` are the PL/pgSQL variables it sets (``(name, type)``);
    ``statement`` sets them (``{risk_thresholds}`` is replaced by the policy's
    thresholds as a jsonb literal); ``needs`` names the computed values it reads,
    computed before it.
    """

    name: str
    variables: tuple[tuple[str, str], ...]
    statement: str
    needs: tuple[str, ...] = ()


_COMPUTED_LIST: tuple[Computed, ...] = (
    Computed("pii", (("v_pii", "boolean"),), "v_pii := memgov.contains_pii(p_item.fact_text);"),
    Computed("secret", (("v_secret", "boolean"),), "v_secret := memgov.contains_secret(p_item.fact_text);"),
    Computed("iban", (("v_iban", "boolean"),), "v_iban := memgov.contains_iban(p_item.fact_text);"),
    Computed(
        "ip_address", (("v_ip_address", "boolean"),), "v_ip_address := memgov.contains_ip_address(p_item.fact_text);"
    ),
    Computed(
        "risk",
        (("v_risk_score", "numeric"), ("v_risk_level", "text")),
        "SELECT r.score, r.level INTO v_risk_score, v_risk_level\n"
        "  FROM memgov.risk_assessment(p_operation, v_pii, v_secret, p_item.context_source,\n"
        "                              p_item.org_id, p_item.project_id, {risk_thresholds}) AS r;",
        needs=("pii", "secret"),
    ),
)

#: The values computed before the rules, in the order they are computed (a value
#: comes after those it needs).
COMPUTED: Final[Mapping[str, Computed]] = MappingProxyType({c.name: c for c in _COMPUTED_LIST})
#: The computed value whose variables every decision carries (risk_score, risk_level).
DECISION_RISK: Final = "risk"


@dataclass(frozen=True)
class FieldSpec:
    """One field of the policy language.

    ``column`` is the column of ``memgov.long_term_memory_items`` (= the key of
    the item JSON) the field reads, or ``None`` for computed fields. ``values``
    lists an enum's allowed values; ``minimum``/``maximum`` bound numeric and int
    fields. ``nullable`` fields may be compared with ``null`` (``eq``/``neq``).
    ``retention`` is False for fields that only exist while a write is being
    decided (they cannot be read by ``auto_delete`` rules).

    ``sql`` is the expression that reads the field inside a compiled function
    (``None``: ``p_item.<column>``; ``{key}`` stands for the metadata key as a
    literal); ``needs`` names the :data:`COMPUTED` values it reads, which the
    compiler declares and computes first.
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
    sql: str | None = None
    needs: tuple[str, ...] = ()

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

    @property
    def strict_input(self) -> str | None:
        """The field whose NULL makes this one unknown, which strict mode denies:
        the field itself for columns and metadata keys, ``fact_text`` for what the
        detectors and ``content.length`` compute from it, None for values that are
        never missing (the operation, the actor, the risk score, which counts a
        missing tenant or project itself)."""
        if self.origin in (FieldOrigin.ITEM, FieldOrigin.METADATA):
            return self.name
        if self.origin in (FieldOrigin.DETECTOR, FieldOrigin.DERIVED):
            return "fact_text"
        return None


SOURCES: Final[tuple[str, ...]] = ("user_confirmed", "agent_extracted", "system_rule")
OPERATION_TYPES: Final[tuple[str, ...]] = ("remember", "update", "forget", "search", "get")
#: The operations that read memories (memgov.search, memgov.get, a direct SELECT).
READ_OPERATIONS: Final[frozenset[str]] = frozenset({"search", "get"})
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
#: The largest PostgreSQL integer (int4): priorities and content.length stay inside it.
INT4_MAX: Final = 2**31 - 1

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
        sql="p_operation",
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
        "store.namespace",
        _T.TEXT,
        _O.ITEM,
        "namespace",
        nullable=True,
        description="a LangGraph store item's namespace, its labels joined with '.' (docs/langgraph.md)",
    ),
    FieldSpec(
        "store.key",
        _T.TEXT,
        _O.ITEM,
        "item_key",
        nullable=True,
        description="a LangGraph store item's key (docs/langgraph.md)",
    ),
    FieldSpec(
        "context.actor",
        _T.TEXT,
        _O.ACTOR,
        None,
        retention=False,
        description="the database role performing the write (current_user)",
        sql="p_actor",
    ),
    FieldSpec(
        "content.contains_pii",
        _T.BOOL,
        _O.DETECTOR,
        None,
        description="PII detector over fact_text (docs/detectors.md)",
        sql="v_pii",
        needs=("pii",),
    ),
    FieldSpec(
        "content.contains_secret",
        _T.BOOL,
        _O.DETECTOR,
        None,
        description="secret detector over fact_text (docs/detectors.md)",
        sql="v_secret",
        needs=("secret",),
    ),
    FieldSpec(
        "content.contains_iban",
        _T.BOOL,
        _O.DETECTOR,
        None,
        description="IBAN with valid mod-97 check digits in fact_text (docs/detectors.md)",
        sql="v_iban",
        needs=("iban",),
    ),
    FieldSpec(
        "content.contains_ip_address",
        _T.BOOL,
        _O.DETECTOR,
        None,
        description="IPv4 or IPv6 address in fact_text, not part of contains_pii (docs/detectors.md)",
        sql="v_ip_address",
        needs=("ip_address",),
    ),
    FieldSpec(
        "content.length",
        _T.INT,
        _O.DERIVED,
        None,
        minimum=_ZERO,
        maximum=Decimal(INT4_MAX),
        description="characters of fact_text",
        sql="char_length(p_item.fact_text)",
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
        sql="v_risk_score",
        needs=("risk",),
    ),
    FieldSpec(
        "risk_level",
        _T.ENUM,
        _O.RISK,
        None,
        values=RISK_LEVELS,
        retention=False,
        description="risk level from risk_thresholds",
        sql="v_risk_level",
        needs=("risk",),
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
    sql="(p_item.metadata ->> {key})",
)

DETECTOR_FIELDS: Final[frozenset[str]] = frozenset(f.name for f in _FIELD_LIST if f.origin is FieldOrigin.DETECTOR)
RISK_FIELDS: Final[frozenset[str]] = frozenset(f.name for f in _FIELD_LIST if f.origin is FieldOrigin.RISK)
#: Fields that exist only while a write is decided: not readable by auto_delete.
WRITE_ONLY_FIELDS: Final[frozenset[str]] = frozenset(f.name for f in _FIELD_LIST if not f.retention)

# Names people reach for that are not fields; the hint says what to write.
FIELD_HINTS: Final[Mapping[str, str]] = MappingProxyType(
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
        "contains_iban": "content.contains_iban",
        "contains_ip_address": "content.contains_ip_address",
        "contains_ip": "content.contains_ip_address",
        "content.contains_ip": "content.contains_ip_address",
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


def computed_for(fields: Iterable[str]) -> tuple[Computed, ...]:
    """The values to compute before rules that read ``fields``, with what they
    need, each once, in :data:`COMPUTED` order."""
    wanted: set[str] = set()
    todo = [n for f in fields if (spec := lookup_field(f)) is not None for n in spec.needs]
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo.extend(COMPUTED[name].needs)
    return tuple(c for c in _COMPUTED_LIST if c.name in wanted)


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

OPERATOR_HINTS: Final[Mapping[str, str]] = MappingProxyType(
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
#: What a policy that does not say gets: ``mode:`` and ``defaults: on_policy_miss:``.
DEFAULT_MODE: Final[Mode] = "enforce"
DEFAULT_ON_POLICY_MISS: Final[WriteAction] = "require_approval"

#: The longest rule id, reason code or category a policy may use.
MAX_LABEL: Final = 200
#: The longest role name (PostgreSQL NAMEDATALEN - 1).
MAX_ROLE: Final = 63
