"""Policy files: YAML text -> a validated, typed, immutable model.

This package reads a policy (docs/policy.md), reports every mistake in it at once as
``file:line: rule-id: message`` lines, and returns a :class:`Policy` that the
compiler turns into PL/pgSQL. It never writes SQL: values are typed Python
objects (``str``, ``int``, ``Decimal``, ``bool``, ``None``, :class:`RelativeTime`,
aware ``datetime``, or a ``tuple`` of those for ``in``/``nin``), fields come from
the fixed :data:`FIELDS` table, and durations are validated integers.

Public surface (used by the compiler, the deploy code and the CLI), all
importable from ``memgov_pg.policy``:

* :func:`load_policy` -> :class:`Policy` (raises :class:`PolicyValidationError`)
* :func:`validate_policy` -> ``list[PolicyError]`` (errors only)
* :func:`analyze_policy` -> :class:`PolicyReport` (policy or None, errors, warnings)
* each finding a :class:`PolicyError` with a stable ``code`` (docs/policy.md, "Finding codes")
* the tables :data:`FIELDS`, :data:`OPERATORS`, :data:`OPERATORS_BY_TYPE`,
  :data:`WRITE_ACTIONS`, :data:`RETENTION_ACTIONS`, :data:`ACTION_ALIASES`,
  and :func:`lookup_field` (which also knows ``metadata.<key>``).

A pipeline, one job per module:

* the language: :mod:`.vocabulary` — fields (with their SQL and what they need
  computed first), operators, actions, modes, operations, sources, statuses,
  retention kinds, categories; :mod:`.durations` — durations and time values;
  :mod:`.regex_checks` — offline checks of ``regex`` patterns;
* the typed model: :mod:`.model` — Condition, Rule, Policy, the settings;
* the findings: :mod:`.findings` — PolicyError (file, line, rule, stable code,
  message), PolicyValidationError;
* read: :mod:`.reader_nodes` (a :class:`~.reader_nodes.Reading`: the findings so far
  and the generic YAML shapes), :mod:`.reader_conditions`, :mod:`.reader_rules`,
  :mod:`.reader` — YAML text with line numbers to the model, every value checked
  against the vocabulary;
* passes, plain functions over the finished model: :mod:`.lints` (auto_delete,
  ordering, shadowed and pre-empted rules), :mod:`.satisfiable` (rules that can never
  match), :mod:`.coverage` (what falls to ``on_policy_miss``), :mod:`.overrides` (a
  tenant override against the global policy);
* :mod:`.api` — the entry points above (read, then the passes);
* :mod:`.json_schema` — the JSON schema for editors, generated from the vocabulary.

The compiler imports the vocabulary, the durations and the model. The choices made
where the language could go either way are listed in ``docs/policy.md``; the short
version is in the docstrings.
"""

from __future__ import annotations

from .api import PolicySource, analyze_policy, load_policy, validate_policy
from .durations import (
    MAX_DURATION_SECONDS,
    Duration,
    RelativeTime,
    parse_duration,
    parse_time_value,
)
from .findings import PolicyError, PolicyValidationError
from .model import (
    Condition,
    ConditionValue,
    Feedback,
    Policy,
    PolicyReport,
    Retention,
    RiskThresholds,
    Rule,
    Scalar,
    SourceGrants,
    default_reason_code,
)
from .regex_checks import (
    MAX_REGEX_COMPILE_MS,
    MAX_REGEX_LENGTH,
    RegexChecker,
    basic_regex_check,
    regex_compile_problem,
    regex_cost_problem,
)
from .vocabulary import (
    ACTION_ALIASES,
    ACTIONS,
    COMPUTED,
    DETECTOR_FIELDS,
    FIELDS,
    KNOWN_CATEGORIES,
    METADATA_FIELD,
    METADATA_KEY_RE,
    METADATA_PREFIX,
    MODES,
    OPERATION_TYPES,
    OPERATORS,
    OPERATORS_BY_TYPE,
    RETENTION_ACTIONS,
    RETENTION_POLICIES,
    RISK_FIELDS,
    RISK_LEVELS,
    SOURCES,
    STATUSES,
    WRITE_ACTIONS,
    WRITE_ONLY_FIELDS,
    Action,
    Computed,
    FieldOrigin,
    FieldSpec,
    FieldType,
    Mode,
    WriteAction,
    lookup_field,
)

__all__ = [
    "ACTIONS",
    "ACTION_ALIASES",
    "COMPUTED",
    "DETECTOR_FIELDS",
    "FIELDS",
    "KNOWN_CATEGORIES",
    "MAX_DURATION_SECONDS",
    "MAX_REGEX_COMPILE_MS",
    "MAX_REGEX_LENGTH",
    "METADATA_FIELD",
    "METADATA_KEY_RE",
    "METADATA_PREFIX",
    "MODES",
    "OPERATION_TYPES",
    "OPERATORS",
    "OPERATORS_BY_TYPE",
    "RETENTION_ACTIONS",
    "RETENTION_POLICIES",
    "RISK_FIELDS",
    "RISK_LEVELS",
    "SOURCES",
    "STATUSES",
    "WRITE_ACTIONS",
    "WRITE_ONLY_FIELDS",
    "Action",
    "Computed",
    "Condition",
    "ConditionValue",
    "Duration",
    "Feedback",
    "FieldOrigin",
    "FieldSpec",
    "FieldType",
    "Mode",
    "Policy",
    "PolicyError",
    "PolicyReport",
    "PolicySource",
    "PolicyValidationError",
    "RegexChecker",
    "RelativeTime",
    "Retention",
    "RiskThresholds",
    "Rule",
    "Scalar",
    "SourceGrants",
    "WriteAction",
    "analyze_policy",
    "basic_regex_check",
    "default_reason_code",
    "load_policy",
    "lookup_field",
    "parse_duration",
    "parse_time_value",
    "regex_compile_problem",
    "regex_cost_problem",
    "validate_policy",
]
