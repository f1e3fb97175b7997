"""The JSON schema of policy files for editors, generated from the vocabulary.

``policies/schema/memgov-policy.schema.json`` is this module's output; a unit
test fails when the committed file is stale. Regenerate it with
``scripts/generate-policy-schema`` (or ``python -m memgov_pg.policy.json_schema``);
``--check`` only reports whether it is current.

The schema is a convenience: ``memgov validate`` is the authority (it also
checks shadowed rules, duplicate ids, regexes and value ranges a schema
cannot express). Engine settings the policy leaves out take SQL's defaults,
which the schema does not restate.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from .durations import DURATION_UNITS
from .model import BATCH_SIZE_RANGE, FEEDBACK_BOUNDS, TEXT_CONFIG_RE, RiskThresholds
from .reader import REPLAY_KEYS, RETENTION_KEYS, RISK_THRESHOLD_KEYS, SEARCH_KEYS, SEMVER_RE, TOP_KEYS
from .reader_conditions import WHEN_KEYS
from .reader_rules import RULE_KEYS
from .vocabulary import (
    ACTION_ALIASES,
    ACTIONS,
    DEFAULT_MODE,
    DEFAULT_ON_POLICY_MISS,
    FIELDS,
    INT4_MAX,
    MAX_LABEL,
    MAX_ROLE,
    METADATA_FIELD,
    METADATA_KEY_RE,
    METADATA_PREFIX,
    MODES,
    OPERATORS,
    RETENTION_ACTIONS,
    SOURCES,
    WRITE_ACTIONS,
    FieldSpec,
    FieldType,
)

#: Where the generated schema is kept, from the repository's root.
SCHEMA_PATH = Path("policies") / "schema" / "memgov-policy.schema.json"
SCHEMA_ID = "https://memgov-pg.dev/schema/memgov-policy.schema.json"
_UNSET = "unset: the engine's default (SELECT memgov.setting_defaults())"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/$defs/{name}"}


def _number(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


def _any_case(word: str) -> str:
    """``day`` -> ``[Dd][Aa][Yy]``: JSON Schema patterns have no case-insensitive flag."""
    return "".join(f"[{c.upper()}{c.lower()}]" for c in word)


def _duration_pattern() -> str:
    units = "|".join(_any_case(u.removesuffix("s")) for u in DURATION_UNITS)
    return rf"[0-9]+\s*({units})[Ss]?\s*$"


def _optional_section(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": ["object", "null"], "additionalProperties": False, **extra, "properties": properties}


def _bounded(kind: str, lo: Decimal | int, hi: Decimal | int, **extra: Any) -> dict[str, Any]:
    lo_ = _number(lo) if isinstance(lo, Decimal) else lo
    hi_ = _number(hi) if isinstance(hi, Decimal) else hi
    return {"type": kind, "minimum": lo_, "maximum": hi_, **extra}


# -- the values of a field ----------------------------------------------------


def _kind(spec: FieldSpec) -> str:
    """The name of a field's value definitions (fields of one shape share them)."""
    if spec.type is FieldType.ENUM:
        name = f"enum_{spec.name}"
    elif spec.type in (FieldType.NUMERIC, FieldType.INT):
        assert spec.minimum is not None and spec.maximum is not None
        name = f"{spec.type.value}_{_number(spec.minimum)}_{_number(spec.maximum)}"
    else:
        name = spec.type.value
    return name + ("_nullable" if spec.nullable else "")


def _base(spec: FieldSpec) -> dict[str, Any]:
    """One value of the field (what ``gt`` or an ``in`` member takes)."""
    if spec.type is FieldType.ENUM:
        return {"enum": list(spec.values or ())}
    if spec.type is FieldType.TIMESTAMPTZ:
        return _ref("timeValue")
    if spec.type is FieldType.NUMERIC:
        assert spec.minimum is not None and spec.maximum is not None
        return {"type": "number", "minimum": float(spec.minimum), "maximum": float(spec.maximum)}
    if spec.type is FieldType.INT:
        assert spec.minimum is not None and spec.maximum is not None
        return _bounded("integer", spec.minimum, spec.maximum)
    return {"type": {FieldType.TEXT: "string", FieldType.BOOL: "boolean"}[spec.type]}


def _operand(spec: FieldSpec, op: str) -> dict[str, Any]:
    """What ``op`` takes on this field."""
    base = _base(spec)
    if op in ("eq", "neq"):
        return {"anyOf": [base, {"type": "null"}]} if spec.nullable else base
    if op in ("in", "nin"):
        return {"type": "array", "minItems": 1, "items": base}
    if op in ("contains", "regex"):
        return {"type": "string", "minLength": 1}
    return base


def _operators(spec: FieldSpec) -> list[str]:
    return [op for op in OPERATORS if op in spec.operators]


def _value_def(spec: FieldSpec) -> dict[str, Any]:
    """``value:`` of a ``when:`` entry: what any operator of the field takes."""
    alternatives: list[dict[str, Any]] = []
    for op in _operators(spec):
        operand = _operand(spec, op)
        if operand not in alternatives:
            alternatives.append(operand)
    return {"anyOf": alternatives}


def _entry_def(spec: FieldSpec) -> dict[str, Any]:
    """A ``condition:`` entry: a value (eq), a list (in) or ``{operator: value, ...}``."""
    operators = {op: _operand(spec, op) for op in _operators(spec)}
    if spec.type is FieldType.TIMESTAMPTZ:
        operators["older_than"] = {**_ref("duration"), "description": "shorthand for lt: now() - DURATION"}
    alternatives = [operators["eq"]]
    if "in" in operators:
        alternatives.append(operators["in"])
    alternatives.append({"type": "object", "minProperties": 1, "additionalProperties": False, "properties": operators})
    return {"anyOf": alternatives}


def _when_case(test: dict[str, Any], spec: FieldSpec) -> dict[str, Any]:
    return {
        "if": {"properties": {"field": test}, "required": ["field"]},
        "then": {"properties": {"operator": {"enum": _operators(spec)}, "value": _ref(_kind(spec) + "_value")}},
    }


def _field_defs() -> dict[str, Any]:
    specs = [*FIELDS.values(), METADATA_FIELD]
    defs: dict[str, Any] = {}
    for spec in specs:
        defs[_kind(spec) + "_entry"] = _entry_def(spec)
        defs[_kind(spec) + "_value"] = _value_def(spec)
    return defs


# -- the schema ---------------------------------------------------------------


def build() -> dict[str, Any]:
    """The schema as a JSON document."""
    metadata = f"^{re.escape(METADATA_PREFIX)}{METADATA_KEY_RE.pattern}$"
    thresholds = RiskThresholds()
    # the thresholds split the risk score's range; the confidence floor is a confidence
    risk_lo, risk_hi = FIELDS["risk_score"].minimum, FIELDS["risk_score"].maximum
    floor_lo, floor_hi = FIELDS["confidence"].minimum, FIELDS["confidence"].maximum
    assert risk_lo is not None and risk_hi is not None and floor_lo is not None and floor_hi is not None
    label = {"type": "string", "minLength": 1, "maxLength": MAX_LABEL}
    aliases = {a: [k for k, v in ACTION_ALIASES.items() if v == a] for a in WRITE_ACTIONS}
    properties: dict[str, Any] = {
        "version": {
            "type": "string",
            "description": "semver, recorded on every decision",
            "pattern": f"^{SEMVER_RE.pattern}$",
        },
        "description": {"type": "string"},
        "mode": {"enum": list(MODES), "default": DEFAULT_MODE},
        "defaults": _optional_section(
            {
                "on_policy_miss": {
                    "enum": [*WRITE_ACTIONS, *(k for k, v in ACTION_ALIASES.items() if v in WRITE_ACTIONS)],
                    "default": DEFAULT_ON_POLICY_MISS,
                }
            }
        ),
        "risk_thresholds": _optional_section(
            {
                name: _bounded("number", risk_lo, risk_hi, default=float(getattr(thresholds, name)))
                for name in RISK_THRESHOLD_KEYS
            }
        ),
        "feedback": _optional_section(
            {name: _bounded("number", lo, hi, description=_UNSET) for name, (lo, hi) in FEEDBACK_BOUNDS.items()}
        ),
        "sources": _optional_section(
            {
                source: {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": MAX_ROLE}}
                for source in SOURCES
            },
            description='database roles allowed to claim each fact source; "*" = every writer',
        ),
        "retention": _optional_section(
            {
                "schedule": {"type": "string", "description": f"pg_cron schedule (GMT); {_UNSET}"},
                "batch_size": _bounded("integer", *BATCH_SIZE_RANGE, description=_UNSET),
                "confidence_floor": _bounded("number", floor_lo, floor_hi, description=_UNSET),
                "confidence_grace": {**_ref("duration"), "description": _UNSET},
                "approval_ttl": {**_ref("duration"), "description": _UNSET},
            }
        ),
        "search": _optional_section(
            {
                "text_config": {
                    "type": "string",
                    "pattern": f"^{TEXT_CONFIG_RE.pattern}$",
                    "default": "simple",
                    "description": "the text search configuration of memgov.search (docs/recall.md)",
                }
            }
        ),
        "replay": _optional_section(
            {
                "sample_rate": _bounded("number", 0, 1, description=_UNSET),
                "keep": {**_ref("duration"), "description": _UNSET},
            },
            description="a sample of the writes stored or held, kept for memgov replay (docs/changing-policies.md)",
        ),
        "rules": {"type": ["array", "null"], "items": _ref("rule")},
    }
    assert tuple(properties) == TOP_KEYS and tuple(properties["retention"]["properties"]) == RETENTION_KEYS
    assert tuple(properties["search"]["properties"]) == SEARCH_KEYS
    assert tuple(properties["replay"]["properties"]) == REPLAY_KEYS
    rule: dict[str, Any] = {
        "id": label,
        "description": {"type": "string"},
        "priority": {
            "type": "integer",
            "minimum": -INT4_MAX - 1,
            "maximum": INT4_MAX,
            "description": "ascending; first match wins; ties keep file order (warning)",
        },
        "enabled": {"type": "boolean", "default": True},
        "match": {"enum": ["all", "any"], "default": "all", "description": "how the when: conditions combine"},
        "when": {"type": "array", "minItems": 1, "items": _ref("whenCondition")},
        "category": _ref("category"),
        "condition": _ref("conditionMap"),
        "action": _ref("action"),
        "reason_codes": {"type": "array", "minItems": 1, "items": label},
    }
    assert tuple(rule) == RULE_KEYS
    defs: dict[str, Any] = {
        "duration": {
            "type": "string",
            "pattern": r"^\s*" + _duration_pattern(),
            "description": "N " + "|".join(DURATION_UNITS),
        },
        "timeValue": {
            "description": f'"now() - N {"|".join(DURATION_UNITS)}", {{older_than: "N days"}}'
            " or an ISO 8601 timestamp with a UTC offset",
            "anyOf": [
                {"type": "string", "pattern": rf"^\s*{_any_case('now')}\s*\(\s*\)\s*-\s*" + _duration_pattern()},
                {"type": "string", "format": "date-time"},
                {
                    "type": "object",
                    "required": ["older_than"],
                    "additionalProperties": False,
                    "properties": {"older_than": _ref("duration")},
                },
            ],
        },
        "field": {"anyOf": [{"enum": list(FIELDS)}, {"type": "string", "pattern": metadata}]},
        "operator": {"enum": list(OPERATORS)},
        "action": {
            "enum": list(ACTIONS),
            "description": ", ".join(a + "".join(f" (alias {k})" for k in aliases[a]) for a in WRITE_ACTIONS)
            + f"; {', '.join(RETENTION_ACTIONS)} for the retention sweep",
        },
        "whenCondition": {
            "type": "object",
            "required": list(WHEN_KEYS),
            "additionalProperties": False,
            "properties": {"field": _ref("field"), "operator": _ref("operator"), "value": True},
            "allOf": [
                *(_when_case({"const": name}, spec) for name, spec in FIELDS.items()),
                _when_case({"type": "string", "pattern": f"^{re.escape(METADATA_PREFIX)}"}, METADATA_FIELD),
            ],
        },
        "conditionMap": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": False,
            "description": "dialect B: field -> value (eq), list (in) or {operator: value, ...}; all ANDed",
            "properties": {
                name: {
                    "description": f"{spec.type.value}: {spec.description}" if spec.description else spec.type.value,
                    **_ref(_kind(spec) + "_entry"),
                }
                for name, spec in FIELDS.items()
            },
            "patternProperties": {metadata: _ref(_kind(METADATA_FIELD) + "_entry")},
        },
        "category": {
            "anyOf": [
                {"const": "*"},
                {"type": "string", "minLength": 1},
                {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
            ]
        },
        "rule": {
            "type": "object",
            "required": ["id", "priority", "action"],
            "additionalProperties": False,
            "properties": rule,
        },
        **_field_defs(),
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "memgov-pg policy",
        "description": "A memgov-pg policy file (docs/policy.md). memgov validate is the authority: it also"
        " checks shadowed rules, duplicate ids, regexes and value ranges this schema cannot express."
        " Generated by scripts/generate-policy-schema from memgov_pg/policy/vocabulary.py: do not edit.",
        "type": "object",
        "required": ["version"],
        "additionalProperties": False,
        "properties": properties,
        "$defs": defs,
    }


def render() -> str:
    """The schema file's text: sorted keys (lists keep their order), indent 2, a final newline."""
    return json.dumps(build(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``[--check] [PATH]``: write the schema to PATH (default: the repository's copy),
    or with ``--check`` exit 1 when PATH is not current."""
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    paths = [a for a in args if a != "--check"]
    if len(paths) > 1 or any(a.startswith("-") for a in paths):
        print("usage: generate-policy-schema [--check] [PATH]", file=sys.stderr)
        return 2
    path = Path(paths[0]) if paths else SCHEMA_PATH
    text = render()
    current = path.read_text(encoding="utf-8") if path.exists() else None
    if check:
        if current != text:
            print(f"{path} is stale: run scripts/generate-policy-schema", file=sys.stderr)
            return 1
        return 0
    if current != text:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
