"""The policy checks' finding codes: raised once each, listed once in docs/policy.md.

Every code is a literal (``MGP`` and three digits) passed to a finding's maker: the
reader's ``error`` / ``warn``, or ``error`` / ``warning`` of memgov_pg.policy.findings
(``warn`` in the override comparison). The test reads those calls from the source, so
a new finding without a code, a code raised twice, a code the docs do not list (or list
with another severity) and a listed code raised nowhere all fail here; the corpus run
shows that what the checks report carries those codes.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from memgov_pg.policy import analyze_policy, basic_regex_check
from memgov_pg.policy.findings import CODE_RE
from tests import yaml_text

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "memgov_pg"
DOCS = ROOT / "docs" / "policy.md"
ROW_RE = re.compile(r"^\| (MGP\d{3}) \| (error|warning) \| (.+) \|$")
SEVERITY = {"error": "error", "warn": "warning", "warning": "warning"}


def _raised() -> list[tuple[str, str, str]]:
    """(code, severity, where) for every code literal in a call, from the package's source."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            codes = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            codes = [c for c in codes if CODE_RE.fullmatch(c)]
            if not codes:
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else "?"
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            assert name in SEVERITY, f"{where}: code {codes[0]} passed to {name}(), not to error() or warn()"
            assert len(codes) == 1, f"{where}: more than one code in one call"
            found.append((codes[0], SEVERITY[name], where))
    return found


def _documented() -> list[tuple[str, str, str]]:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("### Finding codes", 1)[1].split("\n## ", 1)[0]
    return [m.groups() for line in section.splitlines() if (m := ROW_RE.match(line))]  # type: ignore[misc]


def test_each_code_is_raised_at_one_place() -> None:
    raised = _raised()
    assert len(raised) >= 80
    seen: dict[str, str] = {}
    for code, _, where in raised:
        assert code not in seen, f"{code} is raised at {seen[code]} and at {where}: a code names one finding"
        seen[code] = where


def test_the_docs_list_every_code_once_with_its_severity() -> None:
    documented = _documented()
    codes = [code for code, _, _ in documented]
    assert len(codes) == len(set(codes)), sorted({c for c in codes if codes.count(c) > 1})
    assert codes == sorted(codes), "docs/policy.md lists the codes in order"
    raised = {code: severity for code, severity, _ in _raised()}
    listed = {code: severity for code, severity, _ in documented}
    assert sorted(set(raised) - set(listed)) == [], "raised but not listed in docs/policy.md's Finding codes"
    assert sorted(set(listed) - set(raised)) == [], "listed in docs/policy.md but raised nowhere"
    assert {c: s for c, s in raised.items() if listed[c] != s} == {}, "the docs give another severity"
    assert all(meaning.strip() for _, _, meaning in documented)


def _corpus() -> list[str]:
    texts = []
    for path in sorted((ROOT / "tests" / "cases" / "policy").glob("*.yaml")):
        texts += [case["policy"] for case in yaml_text.safe_load(path.read_text(encoding="utf-8"))]
    return texts


@pytest.mark.parametrize("text", [pytest.param(t, id=str(i)) for i, t in enumerate(_corpus())])
def test_what_the_checks_report_carries_a_listed_code(text: str) -> None:
    listed = {code: severity for code, severity, _ in _documented()}
    report = analyze_policy(text, filename="case.yaml", regex_checker=basic_regex_check)
    for finding in report.errors + report.warnings:
        assert listed.get(finding.code) == finding.severity, str(finding)
        shown = f"warning: {finding.code} " if finding.severity == "warning" else f"{finding.code} "
        assert str(finding) == f"case.yaml:{finding.line}: {finding.rule_id}: {shown}{finding.message}"
