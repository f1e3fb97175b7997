"""The policy-validation corpus: tests/cases/policy/*.yaml (one topic a file).

Each file is a list of cases::

    - note: what the case shows            # the pytest id
      policy: |                            # the policy text (line 1 = first line)
        version: "1.0.0"
        ...
      pg_rejects: ["(?<x)"]                # optional: patterns the fake PostgreSQL
                                           # regex checker refuses
      # either: every error, exactly (line, rule id, message substring; code if given)
      want_errors:
        - {line: 3, rule_id: "-", code: MGP105, message: "unknown key"}
      # or, for a valid policy, any of these checks
      want:
        rules: [ids in evaluation order]
        write_rules: [...]
        retention_rules: [...]
        warnings: 1                        # number of warnings
        warning_messages: [substrings]
        fields_read: [...]
        conditions: {rule-id: [[field, operator, value], ...]}
        category_scope: {rule-id: [categories] | null}
        actions: {rule-id: action}
        action_alias: {rule-id: alias | null}
        reason_codes: {rule-id: [codes]}
        enabled: {rule-id: bool}
        match: {rule-id: all | any}
        lines: {rule-id: line}
        settings: {dotted.attribute.of.Policy: value}   # compared as str()

No database: the regex checker is a stand-in.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from memgov_pg.policy import (
    Policy,
    PolicyError,
    PolicyValidationError,
    RelativeTime,
    analyze_policy,
    basic_regex_check,
    load_policy,
    validate_policy,
)
from memgov_pg.resources import shipped_policy_files
from tests import yaml_text

ROOT = Path(__file__).resolve().parents[2]
CASES_DIR = ROOT / "tests" / "cases" / "policy"
POLICIES_DIR = ROOT / "policies"

WANT_KEYS = {
    "rules",
    "write_rules",
    "retention_rules",
    "warnings",
    "warning_messages",
    "fields_read",
    "conditions",
    "category_scope",
    "actions",
    "action_alias",
    "reason_codes",
    "enabled",
    "match",
    "lines",
    "settings",
}
CASE_KEYS = {"note", "policy", "want", "want_errors", "pg_rejects"}


def _load_cases() -> list[Any]:
    params = []
    for path in sorted(CASES_DIR.glob("*.yaml")):
        cases = yaml_text.safe_load(path.read_text(encoding="utf-8"))
        assert isinstance(cases, list), f"{path.name}: a case file is a list of cases"
        for case in cases:
            params.append(pytest.param(case, id=f"{path.stem}: {case['note']}"))
    return params


CASES = _load_cases()


def _checker(rejects: list[str]) -> Callable[[str], str | None]:
    def check(pattern: str) -> str | None:
        if pattern in rejects:
            return "invalid regular expression (PostgreSQL)"
        return basic_regex_check(pattern)

    return check


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, RelativeTime):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return value


def _match_errors(actual: list[PolicyError], wanted: list[dict[str, Any]]) -> list[str]:
    """Problems pairing wanted errors with actual ones (order-insensitive, exact count)."""
    left = list(actual)
    problems = []
    for want in wanted:
        for err in left:
            if (
                err.line == want["line"]
                and err.rule_id == str(want["rule_id"])
                and want["message"] in err.message
                and want.get("code", err.code) == err.code
            ):
                left.remove(err)
                break
        else:
            problems.append(f"missing: {want}")
    problems += [f"unexpected: {e}" for e in left]
    return problems


def _check_want(policy: Policy, want: dict[str, Any]) -> None:
    unknown = set(want) - WANT_KEYS
    assert not unknown, f"unknown want keys {unknown}"
    by_id = {r.id: r for r in policy.rules}
    if "rules" in want:
        assert [r.id for r in policy.rules] == want["rules"]
    if "write_rules" in want:
        assert [r.id for r in policy.write_rules] == want["write_rules"]
    if "retention_rules" in want:
        assert [r.id for r in policy.retention_rules] == want["retention_rules"]
    if "warnings" in want:
        assert len(policy.warnings) == want["warnings"], [str(w) for w in policy.warnings]
    for text in want.get("warning_messages", []):
        assert any(text in str(w) for w in policy.warnings), (text, policy.warnings)
    if "fields_read" in want:
        assert sorted(policy.fields_read) == sorted(want["fields_read"])
    for rid, conds in want.get("conditions", {}).items():
        got = [[c.field, c.operator, _plain(c.value)] for c in by_id[rid].conditions]
        assert got == conds, rid
    for rid, scope in want.get("category_scope", {}).items():
        assert _plain(by_id[rid].category_scope) == scope, rid
    for key, attr in (
        ("actions", "action"),
        ("action_alias", "action_alias"),
        ("enabled", "enabled"),
        ("match", "match"),
        ("lines", "line"),
    ):
        for rid, value in want.get(key, {}).items():
            assert getattr(by_id[rid], attr) == value, (rid, attr)
    for rid, codes in want.get("reason_codes", {}).items():
        assert list(by_id[rid].reason_codes) == codes, rid
    for dotted, value in want.get("settings", {}).items():
        obj: Any = policy
        for part in dotted.split("."):
            obj = getattr(obj, part)
        if isinstance(value, list):
            assert _plain(obj) == value, dotted
        else:
            assert str(_plain(obj)) == str(value), dotted


@pytest.mark.parametrize("case", CASES)
def test_policy_case(case: dict[str, Any]) -> None:
    assert set(case) <= CASE_KEYS, set(case) - CASE_KEYS
    assert ("want" in case) != ("want_errors" in case), "a case has want or want_errors"
    report = analyze_policy(case["policy"], filename="case.yaml", regex_checker=_checker(case.get("pg_rejects", [])))
    if "want_errors" in case:
        assert report.policy is None
        problems = _match_errors(list(report.errors), case["want_errors"])
        assert not problems, "\n".join(problems + ["all errors:"] + [str(e) for e in report.errors])
    else:
        assert not report.errors, "\n".join(str(e) for e in report.errors)
        assert report.policy is not None
        _check_want(report.policy, case["want"] or {})


def test_corpus_is_big_enough() -> None:
    assert len(CASES) >= 60
    notes = [p.id for p in CASES]
    assert len(notes) == len(set(notes)), "notes must be unique within a file"


MULTI_ERROR_POLICY = """\
version: 1.2
mode: enforced
colour: blue
defaults: {on_policy_miss: auto_delete}
retention: {batch_size: 0, confidence_grace: 30 dayz}
rules:
  - id: one
    priority: 10
    when:
      - {field: confidance, operator: eq, value: 0.5}
    action: deny
  - id: two
    priority: high
    condition: {is_sensitive: {gt: true}}
    action: allow
  - id: one
    priority: 30
    action: quarantine
  - id: three
    priority: 40
    condition: {last_confirmed_at: {lt: "now() - 30 fortnights"}}
    action: auto_delete
    reason_codes: []
"""


def test_every_error_is_reported_at_once() -> None:
    errors = validate_policy(MULTI_ERROR_POLICY, filename="multi.yaml")
    got = [(e.line, e.rule_id) for e in errors]
    assert got == [
        (1, "-"),  # version is a float
        (2, "-"),  # mode
        (3, "-"),  # unknown top-level key
        (4, "-"),  # on_policy_miss auto_delete
        (5, "-"),  # batch_size
        (5, "-"),  # confidence_grace
        (10, "one"),  # unknown field
        (13, "two"),  # priority not an int
        (14, "two"),  # gt on bool
        (16, "one"),  # duplicate id
        (21, "three"),  # bad time value
        (23, "three"),  # empty reason codes
    ], "\n".join(map(str, errors))
    assert str(errors[0]).startswith("multi.yaml:1: -: MGP201 version must be a quoted semver")
    with pytest.raises(PolicyValidationError) as info:
        load_policy(MULTI_ERROR_POLICY, filename="multi.yaml")
    assert info.value.errors == tuple(errors)
    assert str(info.value) == "\n".join(str(e) for e in errors)
    assert (info.value.file, info.value.line, info.value.rule_id) == ("multi.yaml", 1, "-")


def _shipped_policies() -> list[Path]:
    return shipped_policy_files()


@pytest.mark.parametrize("path", _shipped_policies(), ids=lambda p: str(p.relative_to(POLICIES_DIR)))
def test_shipped_policy_loads(path: Path) -> None:
    report = analyze_policy(path)
    assert not report.errors, "\n".join(str(e) for e in report.errors)
    assert not report.warnings, "\n".join(str(w) for w in report.warnings)
    policy = report.policy
    assert policy is not None
    assert policy.source_path == path
    assert len(policy.sha256) == 64
    assert policy.write_rules


def test_shipped_policies_exist() -> None:
    names = {str(p.relative_to(POLICIES_DIR)) for p in _shipped_policies()}
    assert {
        "default.yaml",
        "examples/memproof.yaml",
        "examples/production-deny-by-default.yaml",
        "examples/tenant-acme-override.yaml",
    } <= names


# -- policies/default.yaml against its comments ----------------------------------
#
# A deliberately tiny reference reading of the model (first match wins; on a
# missing field neq/nin hold and every other test fails, as in the compiler),
# used only to check that the priorities of
# default.yaml make every sentence of its comments hold. The decisions that count are the
# database tests of the compiled function; this catches an ordering mistake in
# the YAML before any database is involved.

_NOW = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)


def _holds(cond: Any, item: dict[str, Any]) -> bool:
    value = item.get(cond.field)
    want = cond.value
    if isinstance(want, RelativeTime):
        want = _NOW - dt.timedelta(seconds=want.seconds)
    if cond.operator in ("eq", "neq") and want is None:
        return (value is None) == (cond.operator == "eq")
    if value is None:
        return cond.operator in ("neq", "nin")
    if isinstance(value, float):
        value = Decimal(str(value))
    ops: dict[str, Callable[[Any, Any], bool]] = {
        "eq": lambda a, b: a == b,
        "neq": lambda a, b: a != b,
        "in": lambda a, b: a in b,
        "nin": lambda a, b: a not in b,
        "gt": lambda a, b: a > b,
        "gte": lambda a, b: a >= b,
        "lt": lambda a, b: a < b,
        "lte": lambda a, b: a <= b,
        "contains": lambda a, b: b in a,
    }
    return ops[cond.operator](value, want)


def _matches(rule: Any, item: dict[str, Any]) -> bool:
    if rule.category_scope is not None and item.get("category") not in rule.category_scope:
        return False
    results = [_holds(c, item) for c in rule.conditions]
    return all(results) if rule.match == "all" else any(results)


def _decide(policy: Policy, item: dict[str, Any]) -> tuple[str, str | None, tuple[str, ...]]:
    for rule in policy.write_rules:
        if _matches(rule, item):
            return rule.action, rule.id, rule.reason_codes
    return policy.on_policy_miss, None, ("DEFAULT_POLICY",)


def _item(category: str, source: str, confidence: float, **extra: Any) -> dict[str, Any]:
    item = {
        "operation_type": "remember",
        "category": category,
        "source": source,
        "confidence": confidence,
        "is_sensitive": False,
        "content.contains_secret": False,
        "content.contains_pii": False,
    }
    item.update({k.replace("__", "."): v for k, v in extra.items()})
    return item


SECTION_9 = [
    # (note, item, action, rule id)
    (
        "secret from the user",
        _item("preference", "user_confirmed", 1.0, content__contains_secret=True),
        "deny",
        "block-secrets",
    ),
    (
        "secret in a sensitive fact",
        _item("user_fact", "system_rule", 0.9, is_sensitive=True, content__contains_secret=True),
        "deny",
        "block-secrets",
    ),
    ("confirmed temporary context", _item("temporary_context", "user_confirmed", 1.0), "deny", "deny-not-long-term"),
    (
        "execution detail from a system rule",
        _item("execution_detail", "system_rule", 1.0),
        "deny",
        "deny-not-long-term",
    ),
    (
        "sensitive temporary context is still denied",
        _item("temporary_context", "agent_extracted", 0.9, is_sensitive=True),
        "deny",
        "deny-not-long-term",
    ),
    ("assumption from the user", _item("assumption", "user_confirmed", 1.0), "require_approval", "approve-assumptions"),
    (
        "sensitive user fact from the user",
        _item("user_fact", "user_confirmed", 1.0, is_sensitive=True),
        "require_approval",
        "confirm-sensitive",
    ),
    (
        "sensitive system rule",
        _item("rule", "system_rule", 1.0, is_sensitive=True),
        "require_approval",
        "confirm-sensitive",
    ),
    (
        "sensitive confident preference",
        _item("preference", "agent_extracted", 0.95, is_sensitive=True),
        "require_approval",
        "confirm-sensitive",
    ),
    ("agent preference at 0.85", _item("preference", "agent_extracted", 0.85), "allow", "auto-confirm-preferences"),
    ("agent preference at 0.8", _item("preference", "agent_extracted", 0.8), "allow", "auto-confirm-preferences"),
    ("agent preference at 0.75", _item("preference", "agent_extracted", 0.75), "allow", "store-confident-agent-facts"),
    (
        "agent preference at 0.7",
        _item("preference", "agent_extracted", 0.7),
        "require_approval",
        "confirm-uncertain-agent-facts",
    ),
    ("agent user fact at 0.701", _item("user_fact", "agent_extracted", 0.701), "allow", "store-confident-agent-facts"),
    (
        "agent user fact at 0.7",
        _item("user_fact", "agent_extracted", 0.7),
        "require_approval",
        "confirm-uncertain-agent-facts",
    ),
    (
        "agent decision at 0.2",
        _item("decision", "agent_extracted", 0.2),
        "require_approval",
        "confirm-uncertain-agent-facts",
    ),
    (
        "user-confirmed decision at low confidence",
        _item("decision", "user_confirmed", 0.1),
        "allow",
        "store-trusted-sources",
    ),
    ("system rule project fact", _item("project_fact", "system_rule", 0.5), "allow", "store-trusted-sources"),
    ("user-confirmed constraint", _item("constraint", "user_confirmed", 0.9), "allow", "store-trusted-sources"),
    ("unknown category is a miss", _item("team_lore", "user_confirmed", 1.0), "require_approval", None),
]


@pytest.mark.parametrize("item, action, rule_id", [pytest.param(*c[1:], id=c[0]) for c in SECTION_9])
def test_default_policy_section_9(item: dict[str, Any], action: str, rule_id: str | None) -> None:
    policy = load_policy(POLICIES_DIR / "default.yaml")
    assert policy.on_policy_miss == "require_approval"
    assert policy.mode == "enforce"
    got_action, got_rule, codes = _decide(policy, item)
    assert (got_action, got_rule) == (action, rule_id)
    if rule_id == "block-secrets":
        assert codes == ("SECRET_DETECTED",)
    if rule_id == "deny-not-long-term":
        assert codes == ("NOT_LONG_TERM",)
    if rule_id is None:
        assert codes == ("DEFAULT_POLICY",)


@pytest.mark.parametrize(
    "confidence, confirmed_days_ago, created_days_ago, deleted",
    [
        (0.29, 31, 400, True),
        (0.3, 31, 400, False),
        (0.29, 29, 400, False),
        (0.0, 365, 400, True),
        (0.29, None, 31, True),  # never confirmed, older than 30 days
        (0.29, None, 29, False),
        (0.5, None, 400, False),
    ],
)
def test_default_policy_retention(
    confidence: float, confirmed_days_ago: int | None, created_days_ago: int, deleted: bool
) -> None:
    policy = load_policy(POLICIES_DIR / "default.yaml")
    assert all(r.category_scope is None for r in policy.retention_rules)
    item = _item("user_fact", "agent_extracted", confidence)
    item["created_at"] = _NOW - dt.timedelta(days=created_days_ago)
    if confirmed_days_ago is not None:
        item["last_confirmed_at"] = _NOW - dt.timedelta(days=confirmed_days_ago)
    assert any(_matches(rule, item) for rule in policy.retention_rules) is deleted
