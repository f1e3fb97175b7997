"""policies/schema/memgov-policy.schema.json: a valid draft 2020-12 schema that
accepts every shipped policy and every policy the Python validator accepts in
the corpus, that lists the same fields, operators and actions as the code, and
that is what memgov_pg.policy.json_schema generates (not a hand-kept copy)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from memgov_pg.policy import (
    ACTIONS,
    FIELDS,
    MODES,
    OPERATORS,
    SOURCES,
    WRITE_ACTIONS,
    analyze_policy,
)
from memgov_pg.policy.json_schema import main, render
from memgov_pg.policy.model import FEEDBACK_BOUNDS
from memgov_pg.policy.reader import RETENTION_KEYS, TOP_KEYS
from memgov_pg.policy.reader_conditions import WHEN_KEYS
from memgov_pg.policy.reader_rules import RULE_KEYS
from memgov_pg.resources import shipped_policy_files
from tests import yaml_text

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "policies"
SCHEMA_PATH = POLICIES / "schema" / "memgov-policy.schema.json"
CASES_DIR = ROOT / "tests" / "cases" / "policy"


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="module")
def validator(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(schema)


def _policy_files() -> list[Path]:
    return shipped_policy_files()


def _jsonable(value: Any) -> Any:
    """YAML -> the JSON an editor would see (timestamps become strings)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    return value


def _errors(validator: Draft202012Validator, document: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in validator.iter_errors(_jsonable(document))
    ]


def test_schema_is_valid(schema: dict[str, Any]) -> None:
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_there_are_policies_to_check() -> None:
    assert len(_policy_files()) >= 4


@pytest.mark.parametrize("path", _policy_files(), ids=lambda p: str(p.relative_to(POLICIES)))
def test_shipped_policy_matches_schema(validator: Draft202012Validator, path: Path) -> None:
    document = yaml_text.safe_load(path.read_text(encoding="utf-8"))
    assert not _errors(validator, document)


def _valid_corpus_policies() -> list[Any]:
    params = []
    for path in sorted(CASES_DIR.glob("*.yaml")):
        for case in yaml_text.safe_load(path.read_text(encoding="utf-8")):
            if "want" in case:
                params.append(pytest.param(case["policy"], id=f"{path.stem}: {case['note']}"))
    return params


@pytest.mark.parametrize("text", _valid_corpus_policies())
def test_schema_accepts_what_the_validator_accepts(validator: Draft202012Validator, text: str) -> None:
    assert analyze_policy(text).ok
    assert not _errors(validator, yaml_text.safe_load(text))


@pytest.mark.parametrize(
    "text, where",
    [
        ('version: "1.0.0"\nrulez: []\n', "<root>"),
        ("version: 1.0.0\nmode: enforcing\n", "mode"),
        ('version: "1.0.0"\nrules: [{id: a, priority: 1, action: denyy}]\n', "rules/0/action"),
        (
            'version: "1.0.0"\nrules: [{id: a, priority: 1, action: deny,'
            " when: [{field: is_sensitive, operator: gt, value: true}]}]\n",
            "rules/0/when/0/operator",
        ),
        (
            'version: "1.0.0"\nrules: [{id: a, priority: 1, action: deny, condition: {confidance: 0.5}}]\n',
            "rules/0/condition",
        ),
        (
            'version: "1.0.0"\nrules: [{id: a, priority: 1, action: deny, condition: {confidence: {gte: 1.5}}}]\n',
            "rules/0/condition/confidence",
        ),
        ('version: "1.0.0"\nretention: {approval_ttl: 3 fortnights}\n', "retention/approval_ttl"),
    ],
)
def test_schema_flags_common_mistakes(validator: Draft202012Validator, text: str, where: str) -> None:
    errors = _errors(validator, yaml_text.safe_load(text))
    assert any(e.startswith(where + ":") for e in errors), errors
    assert not analyze_policy(text).ok


def test_schema_lists_the_code_tables(schema: dict[str, Any]) -> None:
    defs = schema["$defs"]
    assert defs["field"]["anyOf"][0]["enum"] == list(FIELDS)
    assert defs["operator"]["enum"] == list(OPERATORS)
    assert set(defs["action"]["enum"]) == set(ACTIONS)
    assert schema["properties"]["mode"]["enum"] == list(MODES)
    miss = schema["properties"]["defaults"]["properties"]["on_policy_miss"]["enum"]
    assert set(miss) == set(WRITE_ACTIONS) | {"auto_confirm", "require_user_approval"}
    assert set(defs["conditionMap"]["properties"]) == set(FIELDS)


def test_schema_file_is_generated_from_the_vocabulary() -> None:
    """The committed file is what scripts/generate-policy-schema writes: regenerate it when this fails."""
    assert SCHEMA_PATH.read_text(encoding="utf-8") == render(), "run scripts/generate-policy-schema"
    assert main(["--check", str(SCHEMA_PATH)]) == 0


def test_schema_check_reports_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / "schema.json"
    stale.write_text(render().replace('"minProperties": 1', '"minProperties": 2', 1), encoding="utf-8")
    assert main(["--check", str(stale)]) == 1
    assert main([str(stale)]) == 0
    assert main(["--check", str(stale)]) == 0


def test_schema_lists_the_keys_the_reader_knows(schema: dict[str, Any]) -> None:
    defs = schema["$defs"]
    assert set(schema["properties"]) == set(TOP_KEYS)
    assert set(defs["rule"]["properties"]) == set(RULE_KEYS)
    assert set(defs["whenCondition"]["properties"]) == set(WHEN_KEYS)
    assert set(schema["properties"]["retention"]["properties"]) == set(RETENTION_KEYS)
    assert set(schema["properties"]["feedback"]["properties"]) == set(FEEDBACK_BOUNDS)
    assert set(schema["properties"]["sources"]["properties"]) == set(SOURCES)
    # the engine's defaults of these settings live in SQL only
    for section in ("feedback", "retention", "replay"):
        assert all("default" not in p for p in schema["properties"][section]["properties"].values()), section
