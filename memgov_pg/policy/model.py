"""The policy model: what the reader returns and the compiler reads.

Immutable, typed values (``str``, ``int``, ``Decimal``, ``bool``, ``None``,
:class:`~memgov_pg.policy.durations.RelativeTime`, aware ``datetime``, or a
``tuple`` of those for ``in``/``nin``): a :class:`Policy` holds its settings
and its :class:`Rule` s, each a list of :class:`Condition` s.

The engine settings that SQL reads at run time (:class:`Feedback`,
:class:`Retention`) are ``None`` where the policy does not set them: their
defaults live once, in SQL (``memgov.setting_defaults()``), and a key the
policy leaves out is absent from the compiled settings. The
settings the compiler itself needs (risk thresholds, source grants, mode and
on_policy_miss) keep their defaults here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal, TypeAlias

from .durations import Duration, RelativeTime
from .findings import PolicyError
from .vocabulary import (
    DETECTOR_FIELDS,
    READ_OPERATIONS,
    RISK_FIELDS,
    SOURCES,
    Action,
    FieldSpec,
    Mode,
    WriteAction,
    lookup_field,
)

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
        """The field's entry in the field table (the validator only lets known fields through)."""
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
        """Whether this is a retention rule (``auto_delete``), not a write rule."""
        return self.action == "auto_delete"

    @property
    def is_unconditional(self) -> bool:
        """True when the rule matches every item in its category scope."""
        return not self.conditions

    @property
    def display_action(self) -> str:
        """The action as the file spelled it (an alias such as ``auto_confirm``, else the canonical one)."""
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
    """``risk_thresholds:``: the upper bounds of the low, medium and high risk levels (above: critical).

    The defaults are ``memgov.setting_defaults() -> 'risk_thresholds'`` (the compiler always
    writes all three; tests/db/test_setting_defaults.py holds these to that)."""

    low_max: Decimal = Decimal("0.30")
    medium_max: Decimal = Decimal("0.60")
    high_max: Decimal = Decimal("0.80")


@dataclass(frozen=True)
class Feedback:
    """``feedback:``; None = not set by the policy (SQL's default applies)."""

    confirm_delta: Decimal | None = None
    reject_delta: Decimal | None = None
    edit_confidence: Decimal | None = None
    reject_delete_below: Decimal | None = None


#: The range of each ``feedback:`` setting.
FEEDBACK_BOUNDS: Final[Mapping[str, tuple[Decimal, Decimal]]] = MappingProxyType(
    {
        "confirm_delta": (Decimal(0), Decimal(1)),
        "reject_delta": (Decimal(-1), Decimal(0)),
        "edit_confidence": (Decimal(0), Decimal(1)),
        "reject_delete_below": (Decimal(0), Decimal(1)),
    }
)


@dataclass(frozen=True)
class SourceGrants:
    """Which database roles may claim which fact source; ``"*"`` = every writer."""

    user_confirmed: tuple[str, ...] = ("memgov_reviewer", "memgov_admin")
    system_rule: tuple[str, ...] = ("memgov_admin",)
    agent_extracted: tuple[str, ...] = ("*",)

    def roles_for(self, source: str) -> tuple[str, ...]:
        """The roles that may claim ``source`` (``'*'``: every writer); KeyError for an unknown source."""
        if source not in SOURCES:
            raise KeyError(source)
        roles: tuple[str, ...] = getattr(self, source)
        return roles


@dataclass(frozen=True)
class Retention:
    """``retention:``; None = not set by the policy (SQL's default applies)."""

    schedule: str | None = None
    batch_size: int | None = None
    confidence_floor: Decimal | None = None
    confidence_grace: Duration | None = None
    approval_ttl: Duration | None = None


@dataclass(frozen=True)
class Search:
    """``search:``; None = not set by the policy (``memgov.setting_defaults() -> 'search'`` applies)."""

    text_config: str | None = None


@dataclass(frozen=True)
class Replay:
    """``replay:``; None = not set by the policy (memgov.setting_defaults() applies: no sample)."""

    sample_rate: Decimal | None = None
    keep: Duration | None = None


#: What ``search.text_config`` may name: a text search configuration, optionally schema-qualified.
TEXT_CONFIG_RE: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}(\.[a-z_][a-z0-9_]{0,62})?")


#: The range of ``retention.batch_size``.
BATCH_SIZE_RANGE: Final = (1, 1_000_000)


def settings_json(settings: Feedback | Retention | Search | Replay) -> dict[str, Any]:
    """The settings a policy sets, as JSON (numbers and durations as text); the
    ones it leaves out are absent, so that SQL's defaults apply."""
    out: dict[str, Any] = {}
    for name, value in vars(settings).items():
        if value is not None:
            out[name] = value if isinstance(value, int | str) else str(value)
    return out


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
    search: Search = dataclasses.field(default_factory=Search)
    replay: Replay = dataclasses.field(default_factory=Replay)

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
    def governs_reads(self) -> bool:
        """Whether the policy decides reads: one of its rules names ``search`` or ``get`` in an
        ``operation_type`` test. A policy that names neither leaves reads as they were before
        reads were governed: every active memory of the tenant (docs/recall.md)."""
        for rule in self.write_rules:
            for cond in rule.conditions:
                if cond.field != "operation_type":
                    continue
                values = cond.value if isinstance(cond.value, tuple) else (cond.value,)
                if READ_OPERATIONS & set(values):
                    return True
        return False

    @property
    def retention_fields_read(self) -> frozenset[str]:
        """Fields the retention (``auto_delete``) rules read."""
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
        """Whether write decisions need the risk score (a risk field is read)."""
        return bool(self.fields_read & RISK_FIELDS)

    def rule(self, rule_id: str) -> Rule:
        """The rule with id ``rule_id`` (disabled ones too); KeyError when there is none."""
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
        """Whether the policy has no errors (warnings allowed)."""
        return not self.errors


def default_reason_code(rule_id: str) -> str:
    """The reason code of a rule without ``reason_codes``: its id upper-cased, each
    run of characters other than A-Z and 0-9 turned into one ``_`` (``RULE`` if
    nothing is left). ``block-secrets`` -> ``BLOCK_SECRETS``."""
    code = re.sub(r"[^A-Z0-9]+", "_", rule_id.upper()).strip("_")
    return code or "RULE"
