"""`memgov approvals` and `memgov quarantine` as real logins of each role (writer, reviewer,
a login that is both, admin): what each may list and show, four eyes on approve, deny and
release, exit codes and --json, and that a payload cannot rewrite the reviewer's terminal."""

from __future__ import annotations

import json
import subprocess
import uuid
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.attack_helpers import (
    OTHER,
    POLICY,
    Login,
    Logins,
    deploy_policy,
    insert,
    item,
    login_dsn,
    memory,
    quarantine_of,
    request_of,
    unchanged,
)
from tests.cli_helpers import assert_one_line_error, run_memgov


@pytest.fixture
def as_login(memgov_dsn: str):
    """``as_login(role, *args)``: `memgov ARGS --dsn <role's login>`."""

    def run(role: str, *args: str) -> subprocess.CompletedProcess[str]:
        return run_memgov(*args, "--dsn", login_dsn(memgov_dsn, role))

    return run


def held_by(conn: psycopg.Connection[Any], su: psycopg.Connection[Any], **extra: Any) -> tuple[uuid.UUID, uuid.UUID]:
    """A held INSERT by the login of ``conn``: (memory_id, request_id)."""
    row = insert(conn, item("held", **extra)).fetchone()
    assert row is not None and row[1] == "pending_approval"
    return row[0], request_of(su, row[0])


def quarantined_by(
    conn: psycopg.Connection[Any], su: psycopg.Connection[Any], **extra: Any
) -> tuple[uuid.UUID, uuid.UUID]:
    """A quarantined INSERT by the login of ``conn``: (memory_id, quarantine_id)."""
    memory_id = uuid.uuid4()
    assert insert(conn, item("quarantined", memory_id=memory_id, **extra)).rowcount == 0
    return memory_id, quarantine_of(su, memory_id)


def ok_json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# -- reading the queues ----------------------------------------------------------------------------


@pytest.mark.slow
def test_each_login_lists_what_row_level_security_lets_it_see(su, writer, login: Login, logins: Logins, as_login):
    _, mine = held_by(writer, su)
    _, theirs = held_by(login(logins.gwriter, OTHER), su, org=OTHER)

    listed = ok_json(as_login(logins.reviewer, "approvals", "list", "--tenant", "acme", "--json"))
    assert [r["request_id"] for r in listed] == [str(mine)]
    (record,) = listed
    assert (record["org_id"], record["operation"], record["status"]) == ("acme", "remember", "pending")
    assert (record["payload"]["fact_text"], record["requested_login"]) == ("likes tea", logins.writer)
    assert record["decision"]["matched_rule_ids"] == ["hold-uncertain-preferences"]
    assert [r["request_id"] for r in ok_json(as_login(logins.greviewer, "approvals", "list", "--tenant", OTHER,
                                                      "--json"))] == [str(theirs)]  # fmt: skip

    text = as_login(logins.reviewer, "approvals", "list", "--tenant", "acme")
    assert text.returncode == 0, text.stderr
    (line,) = [ln for ln in text.stdout.splitlines() if str(mine) in ln]
    assert "preference: likes tea" in line and logins.writer in line and str(theirs) not in text.stdout
    assert text.stderr.strip() == "1 pending request in tenant acme"

    # an admin sees every tenant, or the one --tenant names
    everything = ok_json(as_login(logins.admin, "approvals", "list", "--json"))
    assert {r["request_id"] for r in everything} == {str(mine), str(theirs)}
    only = ok_json(as_login(logins.admin, "approvals", "list", "--tenant", OTHER, "--json"))
    assert [r["request_id"] for r in only] == [str(theirs)]
    assert ok_json(as_login(logins.reviewer, "approvals", "list", "--tenant", "acme", "--status", "approved",
                            "--json")) == []  # fmt: skip


@pytest.mark.slow
def test_who_may_not_read_the_queues_gets_one_line(su, writer, logins: Logins, as_login):
    held_by(writer, su)
    no_tenant = as_login(logins.reviewer, "approvals", "list")
    assert no_tenant.returncode == 2
    assert_one_line_error(no_tenant, "give --tenant ORG")
    for role in (logins.writer, logins.nobody):
        refused = as_login(role, "quarantine", "list", "--tenant", "acme")
        assert refused.returncode == 1
        assert_one_line_error(refused, f"login {role} may not review", "[42501]")
    # a bound reviewer acts in its own tenants only
    su.execute("SELECT memgov.grant_tenant(%s, %s)", (logins.reviewer2, OTHER))
    unbound = as_login(logins.reviewer2, "approvals", "list", "--tenant", "acme")
    assert unbound.returncode == 1
    assert_one_line_error(unbound, "not bound to tenant acme", "memgov tenant grant", "[42501]")


@pytest.mark.slow
def test_show_prints_the_payload_whole_and_the_rule_that_held_it(su, writer, logins: Logins, as_login):
    text = "likes tea, " + "very strong " * 20 + "with milk"
    memory_id, request_id = held_by(writer, su, fact_text=text, project_id="atlas", metadata=Jsonb({"channel": "chat"}))
    shown = as_login(logins.reviewer, "approvals", "show", str(request_id), "--tenant", "acme")
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert f"approval request {request_id}" in out and f"remember of memory {memory_id}" in out
    assert "hold-uncertain-preferences [LOW_CONFIDENCE_PREFERENCE] (policy 1.0.0, decision" in out
    assert f"  fact_text         {text}\n" in out  # never cut
    assert '  metadata          {"channel": "chat"}\n' in out and "  project_id        atlas\n" in out
    assert f"by {logins.writer}\n" in out  # the login, which acted as itself
    data = ok_json(as_login(logins.reviewer, "approvals", "show", str(request_id), "--tenant", "acme", "--json"))
    assert data["payload"]["fact_text"] == text and data["request_id"] == str(request_id)
    # another tenant's id looks missing; a malformed id is a usage error
    other = as_login(logins.greviewer, "approvals", "show", str(request_id), "--tenant", OTHER)
    assert other.returncode == 1
    assert_one_line_error(other, f"approval request {request_id} does not exist in tenant {OTHER}", "[MG404]")
    assert as_login(logins.reviewer, "approvals", "show", "not-a-uuid", "--tenant", "acme").returncode == 2


@pytest.mark.slow
def test_show_escapes_what_would_rewrite_the_terminal(su, writer, logins: Logins, as_login):
    forged = "likes tea\n  status      approved\x1b[2K\x1b]0;title\x07 \u202eeulav C:\\new"
    _, request_id = held_by(writer, su, fact_text=forged)
    shown = as_login(logins.reviewer, "approvals", "show", str(request_id), "--tenant", "acme")
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\u202e" not in shown.stdout and "\x07" not in shown.stdout
    # a literal backslash is doubled: no text can pass for an escape
    assert "likes tea\\n  status      approved\\x1b[2K\\x1b]0;title\\x07 \\u202eeulav C:\\\\new" in shown.stdout
    assert [ln for ln in shown.stdout.splitlines() if ln.startswith("  status")] == ["  status      pending"]
    listed = as_login(logins.reviewer, "approvals", "list", "--tenant", "acme")
    assert "\x1b" not in listed.stdout and len(listed.stdout.splitlines()) == 2  # the header and one request
    data = ok_json(as_login(logins.reviewer, "approvals", "show", str(request_id), "--tenant", "acme", "--json"))
    assert data["payload"]["fact_text"] == forged and "\x1b" not in as_login(
        logins.reviewer, "approvals", "show", str(request_id), "--tenant", "acme", "--json").stdout  # fmt: skip


@pytest.mark.slow
def test_show_of_a_held_update_says_what_approving_changes(su, writer, logins: Logins, as_login):
    memory_id = insert(writer, item("allowed", category="preference", confidence="0.9")).fetchone()[0]
    writer.execute(
        "UPDATE memgov.long_term_memory_items SET fact_text = 'likes coffee', confidence = 0.5 WHERE memory_id = %s",
        (memory_id,),
    )
    request_id = request_of(su, memory_id)
    shown = as_login(logins.reviewer, "approvals", "show", str(request_id), "--tenant", "acme")
    assert shown.returncode == 0, shown.stderr
    assert "changes: what approving changes in the memory (now -> then)" in shown.stdout
    assert "  fact_text         likes green tea -> likes coffee\n" in shown.stdout
    assert "  confidence        0.9 -> 0.5\n" in shown.stdout


# -- deciding: four eyes ---------------------------------------------------------------------------


@pytest.mark.slow
def test_the_login_that_made_a_write_cannot_decide_it(su, login: Login, logins: Logins, as_login):
    both = login(logins.both)
    _, request_id = held_by(both, su)
    _, puppets = held_by(login(logins.writer), su, fact_text="likes oolong")
    cases = [
        (logins.both, "approvals", "approve", request_id),
        (logins.both, "approvals", "deny", request_id),
        (logins.puppet, "approvals", "approve", puppets),  # a member of the writer's login role
    ]
    for role, group, verb, entry in cases:
        with unchanged(su, f"{verb} by {role}"):
            result = as_login(role, group, verb, str(entry), "--tenant", "acme", "--json")
        assert result.returncode == 1 and result.stdout == ""
        assert_one_line_error(result, f"{role} cannot decide its own write", "another reviewer", "[42501]")

    approved = ok_json(as_login(logins.reviewer, "approvals", "approve", str(request_id), "--tenant", "acme",
                                "--note", "user said yes", "--json"))  # fmt: skip
    assert (approved["status"], approved["decision"]["action"]) == ("approved", "allow")
    assert approved["decision"]["policy_action"] == "require_approval"
    row = su.execute(
        "SELECT status, decided_login, note FROM memgov.approval_requests WHERE request_id = %s", (request_id,)
    ).fetchone()
    assert row == ("approved", logins.reviewer, "user said yes")
    assert memory(su, uuid.UUID(approved["memory_id"]))["status"] == "active"
    again = as_login(logins.reviewer2, "approvals", "approve", str(request_id), "--tenant", "acme")
    assert again.returncode == 1
    assert_one_line_error(again, "is already approved", "[MG409]")


@pytest.mark.slow
def test_approve_and_deny_print_what_they_did(su, writer, logins: Logins, as_login):
    memory_id, first = held_by(writer, su)
    _, second = held_by(writer, su, fact_text="likes jazz")
    approved = as_login(logins.reviewer, "approvals", "approve", str(first), "--tenant", "acme")
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout == f"approved request {first}: the remember is applied (memory {memory_id})\n"
    denied = as_login(logins.reviewer, "approvals", "deny", str(second), "--tenant", "acme", "--reason", "not a fact")
    assert (denied.returncode, denied.stdout) == (0, f"denied request {second}\n")
    assert su.execute(
        "SELECT status, note FROM memgov.approval_requests WHERE request_id = %s", (second,)
    ).fetchone() == ("denied", "not a fact")
    missing = as_login(logins.reviewer, "approvals", "deny", str(uuid.uuid4()), "--tenant", "acme")
    assert missing.returncode == 1
    assert_one_line_error(missing, "does not exist in tenant acme", "[MG404]")


@pytest.mark.slow
def test_an_approval_the_policy_now_refuses_exits_1(su, writer, logins: Logins, as_login):
    _, request_id = held_by(writer, su)
    deploy_policy(su, "1.1.0", POLICY.replace("    action: require_approval", "    action: deny"))
    result = as_login(logins.reviewer, "approvals", "approve", str(request_id), "--tenant", "acme", "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["status"] == "denied"
    assert_one_line_error(result, "is not approved: the active policy now refuses it", "hold-uncertain-preferences")
    assert su.execute(
        "SELECT status FROM memgov.approval_requests WHERE request_id = %s", (request_id,)
    ).fetchone() == ("denied",)


@pytest.mark.slow
def test_an_admins_tenant_bounds_what_it_decides(su, writer, logins: Logins, as_login):
    _, request_id = held_by(writer, su)
    with unchanged(su, "an approval named in another tenant"):
        wrong = as_login(logins.admin, "approvals", "approve", str(request_id), "--tenant", OTHER)
    assert wrong.returncode == 1
    assert_one_line_error(wrong, f"does not exist in tenant {OTHER}", "[MG404]")
    assert ok_json(as_login(logins.admin, "approvals", "approve", str(request_id), "--json"))["status"] == "approved"


# -- quarantine ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_quarantine_list_show_release_and_purge(su, writer, login: Login, logins: Logins, as_login):
    released_memory, to_release = quarantined_by(writer, su)
    _, to_purge = quarantined_by(writer, su, fact_text="mail me at x@example.com")
    _, own = quarantined_by(login(logins.both), su, fact_text="call me at olena@example.org")

    listed = ok_json(as_login(logins.reviewer, "quarantine", "list", "--tenant", "acme", "--json"))
    assert [r["quarantine_id"] for r in listed] == [str(to_release), str(to_purge), str(own)]
    assert listed[0]["decision"]["matched_rule_ids"] == ["quarantine-untrusted-pii"]
    text = as_login(logins.reviewer, "quarantine", "list", "--tenant", "acme")
    assert "quarantine-untrusted-pii" in text.stdout and "3 held entries in tenant acme" in text.stderr
    shown = as_login(logins.reviewer, "quarantine", "show", str(to_release), "--tenant", "acme")
    assert "  fact_text         Reach me at olena@example.com\n" in shown.stdout
    assert "diverted by quarantine-untrusted-pii [PII_UNTRUSTED]" in shown.stdout

    with unchanged(su, "a release by the login that made the write"):
        own_release = as_login(logins.both, "quarantine", "release", str(own), "--tenant", "acme")
    assert own_release.returncode == 1
    assert_one_line_error(own_release, "cannot decide its own write", "[42501]")

    released = ok_json(as_login(logins.reviewer, "quarantine", "release", str(to_release), "--tenant", "acme",
                                "--json"))  # fmt: skip
    assert (released["status"], released["memory_id"]) == ("released", str(released_memory))
    assert memory(su, released_memory)["status"] == "active"
    purged = as_login(logins.reviewer, "quarantine", "purge", str(to_purge), "--tenant", "acme")
    assert (purged.returncode, purged.stdout) == (0, f"purged quarantine entry {to_purge}: its payload is erased\n")
    gone = ok_json(as_login(logins.reviewer, "quarantine", "show", str(to_purge), "--tenant", "acme", "--json"))
    assert (gone["status"], gone["payload"]) == ("purged", {"purged": True})
    assert "payload: erased (purged)" in as_login(logins.reviewer, "quarantine", "show", str(to_purge),
                                                  "--tenant", "acme").stdout  # fmt: skip
    assert [r["quarantine_id"] for r in ok_json(as_login(logins.reviewer, "quarantine", "list", "--tenant", "acme",
                                                         "--status", "all", "--json"))] == [
        str(to_release), str(to_purge), str(own)
    ]  # fmt: skip
    twice = as_login(logins.reviewer, "quarantine", "purge", str(to_purge), "--tenant", "acme")
    assert twice.returncode == 1
    assert_one_line_error(twice, "is already purged", "[MG409]")
