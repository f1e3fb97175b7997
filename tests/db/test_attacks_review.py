"""Attacks on four eyes: approving, releasing and switching held and quarantined writes.

Every test is one attack, named for it, run by login roles of the test cluster
(``user=<login>``; members of memgov_writer / memgov_reviewer / memgov_admin as
deployments grant them), never by a superuser that merely ``SET ROLE``s. Each
asserts that the attack fails (the SQLSTATE the engine promises) *and* that
every table, log and queue of schema memgov is exactly as it was
(tests/attack_helpers.py snapshots them all, tables added later included). The
fixtures (``su``, ``writer``, ``reviewer``, ``admin``, ``login``) are tests/db/conftest.py's.

Tests named ``test_NN_...`` reproduce the numbered findings of the first attack
review; ``test_x_...`` are variants found while writing these.
"""

from __future__ import annotations

import pytest

from tests.attack_helpers import (
    POLICY,
    deploy_policy,
    held,
    memory,
    quarantined,
    refused,
    seed,
    unchanged,
)

# == 4. self-approval ======================================================================


def test_04_writer_reviewer_cannot_confirm_its_own_held_memory(su, login, logins):
    both = login(logins.both)
    memory_id, _ = held(both, su)
    with refused(su, "42501"):
        both.execute("SELECT memgov.confirm(%s)", (memory_id,))


def test_04_writer_reviewer_cannot_approve_its_own_request_after_set_role(su, login, logins):
    both = login(logins.both)
    _, request_id = held(both, su)
    both.execute("SET ROLE memgov_reviewer")
    with refused(su, "42501"):
        both.execute("SELECT memgov.approve(%s)", (request_id,))


@pytest.mark.parametrize("call", ["approve", "deny", "reject", "confirm_as_writer_role"])
def test_04_writer_reviewer_cannot_decide_its_own_request(su, login, logins, call):
    both = login(logins.both)
    memory_id, request_id = held(both, su)
    with refused(su, "42501"):
        if call == "approve":
            both.execute("SELECT memgov.approve(%s)", (request_id,))
        elif call == "deny":
            both.execute("SELECT memgov.deny(%s)", (request_id,))
        elif call == "reject":
            both.execute("SELECT memgov.reject(%s)", (memory_id,))
        else:
            both.execute("SET ROLE memgov_reviewer")
            both.execute("SELECT memgov.confirm(%s)", (memory_id,))


def test_04_a_member_of_the_requesting_login_cannot_approve(su, writer, login, logins):
    _, request_id = held(writer, su)
    puppet = login(logins.puppet)
    with refused(su, "42501"):
        puppet.execute("SELECT memgov.approve(%s)", (request_id,))


def test_x_four_eyes_holds_for_a_login_whose_name_needs_quoting(su, login, logins):
    """requested_login "AtkMixed_..." must not lose its members to to_regrole's case folding."""
    mixed = login(logins.mixed)
    _, request_id = held(mixed, su)
    puppet = login(logins.mixed_puppet)
    with refused(su, "42501"):
        puppet.execute("SELECT memgov.approve(%s)", (request_id,))


def test_x_writer_reviewer_cannot_release_its_own_quarantined_write(su, login, logins):
    both = login(logins.both)
    _, quarantine_id = quarantined(both, su)
    with refused(su, "42501"):
        both.execute("SELECT memgov.release_quarantine(%s)", (quarantine_id,))


def test_04_confirm_of_a_pending_memory_by_another_reviewer_is_redecided_and_logged(su, writer, reviewer, logins):
    memory_id, request_id = held(writer, su)
    before = su.execute("SELECT count(*) FROM memgov.decision_log").fetchone()[0]
    result = reviewer.execute("SELECT memgov.confirm(%s)", (memory_id,)).fetchone()[0]
    assert result["outcome"] == "approved"
    assert memory(su, memory_id)["status"] == "active"
    assert su.execute("SELECT count(*) FROM memgov.decision_log").fetchone()[0] == before + 1
    assert su.execute(
        "SELECT login, operation FROM memgov.decision_log ORDER BY decision_id DESC LIMIT 1"
    ).fetchone() == (logins.reviewer, "remember")
    assert su.execute(
        "SELECT status, requested_login, decided_login FROM memgov.approval_requests WHERE request_id = %s",
        (request_id,),
    ).fetchone() == ("approved", logins.writer, logins.reviewer)


def test_04_confirm_of_a_pending_memory_the_policy_now_denies_does_not_activate_it(su, writer, reviewer):
    memory_id, _ = held(writer, su)
    stricter = POLICY.replace("action: require_approval", "action: deny")
    deploy_policy(su, "2.0.0", text=stricter)
    reviewer.execute("SELECT memgov.confirm(%s)", (memory_id,))
    row = memory(su, memory_id)
    assert row is None or row["status"] == "pending_approval"
    assert su.execute(
        "SELECT action, policy_version FROM memgov.decision_log ORDER BY decision_id DESC LIMIT 1"
    ).fetchone() == ("deny", "2.0.0")


# == 5. bait and switch ====================================================================

SWITCHES = {
    "update_text": "UPDATE memgov.long_term_memory_items SET fact_text = 'likes whisky', confidence = 0.95"
    " WHERE memory_id = %(id)s",
    "update_category": "UPDATE memgov.long_term_memory_items SET category = 'user_fact' WHERE memory_id = %(id)s",
    "upsert": "INSERT INTO memgov.long_term_memory_items (memory_id, org_id, category, fact_text, source, confidence)"
    " VALUES (%(id)s, 'acme', 'preference', 'likes whisky', 'agent_extracted', 0.95)"
    " ON CONFLICT (memory_id, org_id) DO UPDATE SET fact_text = excluded.fact_text, confidence = excluded.confidence",
}


@pytest.mark.parametrize("switch", sorted(SWITCHES))
@pytest.mark.parametrize("who", ["writer", "admin"])
def test_05_a_pending_memory_is_frozen_for_clients(su, writer, admin, switch, who):
    memory_id, _ = held(writer, su)
    if who == "admin":
        with refused(su, "MG409"):
            admin.execute(SWITCHES[switch], {"id": memory_id})
    elif switch == "upsert":  # row level security refuses the conflicting row it hides
        with refused(su, "42501", "MG409"):
            writer.execute(SWITCHES[switch], {"id": memory_id})
    else:  # a writer does not see pending rows: its UPDATE finds none
        with unchanged(su, "an update of a pending memory"):
            assert writer.execute(SWITCHES[switch], {"id": memory_id}).rowcount == 0


@pytest.mark.parametrize("call", ["forget", "edit"])
def test_05_a_pending_memory_cannot_be_forgotten_or_edited(su, writer, reviewer, call):
    memory_id, _ = held(writer, su)
    with refused(su, "MG409"):
        if call == "forget":
            writer.execute("SELECT memgov.forget(%s)", (memory_id,))
        else:
            reviewer.execute("SELECT memgov.edit(%s, 'likes whisky')", (memory_id,))


def test_05_approval_activates_what_the_reviewer_saw(su, writer, reviewer):
    memory_id, request_id = held(writer, su)
    assert writer.execute(SWITCHES["update_text"], {"id": memory_id}).rowcount == 0  # it cannot see the row
    payload = su.execute(
        "SELECT payload FROM memgov.approval_requests WHERE request_id = %s", (request_id,)
    ).fetchone()[0]
    assert reviewer.execute("SELECT memgov.approve(%s)", (request_id,)).fetchone()[0]["status"] == "approved"
    row = memory(su, memory_id)
    assert (row["status"], row["fact_text"], str(row["confidence"])) == (
        "active", payload["fact_text"], "0.600")  # fmt: skip


# == 6. release activates a different memory ==============================================


def test_06_release_over_a_held_memory_id_is_refused(su, writer, reviewer):
    memory_id, _ = held(writer, su)
    _, quarantine_id = quarantined(writer, su, memory_id=memory_id)
    with refused(su, "MG409"):
        reviewer.execute("SELECT memgov.release_quarantine(%s)", (quarantine_id,))
    assert memory(su, memory_id)["status"] == "pending_approval"


def test_06_release_over_an_active_memory_id_is_refused(su, writer, reviewer):
    memory_id = seed(su, "allowed")
    _, quarantine_id = quarantined(writer, su, memory_id=memory_id)
    with refused(su, "MG409"):
        reviewer.execute("SELECT memgov.release_quarantine(%s)", (quarantine_id,))
