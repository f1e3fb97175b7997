"""memgov validate's on_policy_miss summary (memgov_pg.policy.coverage), on hand-computed policies."""

from __future__ import annotations

from memgov_pg.policy import load_policy
from memgov_pg.policy.coverage import OTHER, coverage

POLICY = """
version: "1.0.0"
defaults: {on_policy_miss: deny}
rules:
  - {id: prefs, priority: 10, category: preference, action: allow}
  - {id: agents, priority: 20, condition: {source: agent_extracted, operation_type: [remember, update]}, action: allow}
  - {id: confident-facts, priority: 30, category: user_fact, condition: {confidence: {gt: 0.8}}, action: allow}
"""


def test_combinations_no_rule_decides_are_listed_as_always_or_may():
    c = coverage(load_policy(POLICY))
    # categories: preference, user_fact, any other; 3 sources; the 3 writes (reads not governed)
    assert (c.on_policy_miss, c.combinations) == ("deny", 27)
    forget_or_trusted = {(s, o) for o in ("remember", "update", "forget") for s in ("user_confirmed", "system_rule")}
    forget_or_trusted.add(("agent_extracted", "forget"))
    assert set(c.always) == {(OTHER, s, o) for s, o in forget_or_trusted}
    # user_fact: only confident-facts applies, and it reads confidence too
    assert set(c.may) == {("user_fact", s, o) for s, o in forget_or_trusted}


def test_reads_count_once_a_policy_governs_them_and_a_search_has_no_source():
    recall = "  - {id: recall, priority: 40, condition: {operation_type: get}, action: allow}\n"
    c = coverage(load_policy(POLICY + recall))
    assert c.combinations == 27 + 9 + 3  # get: 3 categories x 3 sources; search: 3 categories, no source
    assert [(cat, src) for cat, src, op in c.always if op == "search"] == [(OTHER, None)]
    assert ("user_fact", None, "search") in c.may  # confident-facts reads confidence (a search's min_confidence)
    assert not [x for x in c.always if x[2] == "get"]


def test_a_negative_condition_holds_for_a_search_without_source():
    text = """
version: "1.0.0"
defaults: {on_policy_miss: deny}
rules:
  - id: no-agents
    priority: 10
    condition: {source: {neq: agent_extracted}, operation_type: [search, get]}
    action: allow
"""
    c = coverage(load_policy(text))
    assert [x for x in c.always if x[2] == "search"] == []  # NULL source: neq holds
    assert (OTHER, "agent_extracted", "get") in c.always
