"""memgov validate --override (memgov_pg.policy.overrides): what a tenant override
changes for its tenant, on hand-written policies with hand-computed findings."""

from __future__ import annotations

import pytest

from memgov_pg.policy import load_policy
from memgov_pg.policy.overrides import compare_override

GLOBAL = """
version: "1.0.0"
rules:
  - {id: block-secrets, priority: 10, condition: {content.contains_secret: true}, action: deny}
  - {id: hold-sensitive, priority: 20, condition: {is_sensitive: true}, action: require_approval}
  - {id: trusted, priority: 30, condition: {source: user_confirmed}, action: allow}
  - {id: agents, priority: 40, condition: {source: agent_extracted}, action: require_approval}
"""


def findings(override: str, base: str = GLOBAL) -> list[str]:
    return [str(f) for f in compare_override(load_policy(base), load_policy(override), "global.yaml", "acme.yaml")]


def test_a_faithful_override_has_no_finding():
    same = GLOBAL.replace('version: "1.0.0"', 'version: "1.0.0-acme"')
    assert findings(same) == []


def test_an_override_that_renames_reorders_or_adds_rules_is_not_a_conflict():
    override = """
version: "2.0.0"
rules:
  - {id: secrets, priority: 5, condition: {content.contains_secret: true}, action: deny}
  - {id: hold-sensitive, priority: 15, condition: {is_sensitive: true}, action: require_approval}
  - {id: agents, priority: 40, condition: {source: agent_extracted}, action: require_approval}
  - {id: extra, priority: 50, condition: {source: system_rule}, action: allow}
"""
    assert findings(override) == []  # 'trusted' is an allow: losing it loosens nothing


def test_shared_ids_with_other_content_other_actions_and_lost_guards_are_warnings():
    override = """
version: "1.0.0-acme"
mode: monitor
rules:
  - {id: block-secrets, priority: 10, condition: {content.contains_secret: true}, action: quarantine}
  - {id: hold-sensitive, priority: 20, category: [user_fact], condition: {is_sensitive: true}, action: require_approval}
  - {id: trust-agents, priority: 40, condition: {source: agent_extracted}, action: allow}
"""
    assert findings(override) == [
        "acme.yaml:5: block-secrets: warning: MGP601 the global policy's rule 'block-secrets' (global.yaml:4) differs:"
        " action quarantine here, deny there; for the tenant only this one applies",
        "acme.yaml:6: hold-sensitive: warning: MGP601 the global policy's rule 'hold-sensitive' (global.yaml:5)"
        " differs: it matches categories user_fact when is_sensitive eq true here, every category when"
        " is_sensitive eq true there; for the tenant only this one applies",
        "acme.yaml:7: trust-agents: warning: MGP602 decides allow where the global policy's rule 'agents'"
        " (global.yaml:7) decides require_approval on the same conditions",
        "global.yaml:7: agents: warning: MGP603 the override acme.yaml has no such rule: for its tenant, this"
        " require_approval does not apply",
        "acme.yaml:1: -: warning: MGP604 mode is monitor here, enforce in the global policy global.yaml",
    ]


@pytest.mark.slow
def test_the_command_line_reports_them_as_warnings_and_exits_0(tmp_path):
    import json

    from tests.cli_helpers import run_memgov

    base, override = tmp_path / "global.yaml", tmp_path / "acme.yaml"
    base.write_text(GLOBAL)
    override.write_text(
        GLOBAL.replace('version: "1.0.0"', 'version: "1.0.0-acme"').replace("action: deny", "action: allow")
    )
    result = run_memgov("validate", str(base), "--override", str(override), "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [(r["file"], r.get("override_of")) for r in report] == [(str(base), None), (str(override), str(base))]
    [warning] = report[1]["warnings"]  # the same id, the deny turned into an allow: not a lost rule
    assert warning.startswith(f"{override}:4: block-secrets: warning: MGP601 the global policy's rule 'block-secrets'")
    [finding] = report[1]["findings"]
    assert (finding["code"], finding["severity"], finding["line"]) == ("MGP601", "warning", 4)
    assert finding["message"].startswith("the global policy's rule 'block-secrets'")
    text = run_memgov("validate", str(base), "--override", str(override), cwd=tmp_path)
    assert text.returncode == 0 and "warning: MGP601 the global policy's rule" in text.stderr
    assert "differs: action allow here, deny there" in text.stderr
    usage = run_memgov("validate", str(base), str(override), "--override", str(override), cwd=tmp_path)
    assert usage.returncode == 2 and "--override needs exactly one POLICY" in usage.stderr
    missing = run_memgov("validate", str(base), "--override", str(tmp_path / "nope.yaml"), cwd=tmp_path)
    assert missing.returncode == 1 and len(missing.stderr.strip().splitlines()) == 1
