"""memgov.forget_where(filter, dry_run): an erasure request, each memory decided as a forget
(issue 26, decision 2), as real login roles. Counts, legal holds, a policy that denies forgets,
the compact decision log and the deletion log, tenant isolation, the dry run, malformed
filters, and `memgov forget` on the command line."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from memgov_pg.engine import MemoryPolicyEngine, SyncMemoryPolicyEngine
from memgov_pg.errors import SQLError
from tests.attack_helpers import (
    ORG,
    OTHER,
    POLICY,
    deploy_policy,
    insert,
    item,
    login_dsn,
    memory,
    refused,
    seed,
    snapshot,
    unchanged,
)
from tests.cli_helpers import assert_one_line_error, run_memgov

SUBJECT = "user-42"


def forget_where(conn: psycopg.Connection[Any], where: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
    row = conn.execute("SELECT memgov.forget_where(%s, dry_run => %s)", (Jsonb(where), dry_run)).fetchone()
    assert row is not None
    return dict(row[0])


def subject_memories(su: psycopg.Connection[Any], writer: psycopg.Connection[Any]) -> dict[str, list[uuid.UUID]]:
    """Memories of SUBJECT in acme, one or two of each kind, and others that no filter of SUBJECT reaches."""
    made = {
        "allowed": [seed(su, "allowed", subject_id=SUBJECT), seed(su, "allowed", subject_id=SUBJECT)],
        "legal": [seed(su, "legal", subject_id=SUBJECT)],
        "denied": [seed(su, "denied", subject_id=SUBJECT)],
        "held": [seed(su, "held", subject_id=SUBJECT)],
        "quarantined": [seed(su, "quarantined", subject_id=SUBJECT)],
        # a held INSERT: the memory itself waits for a reviewer
        "pending": [insert(writer, item("held", subject_id=SUBJECT)).fetchone()[0]],
        "other_subject": [seed(su, "allowed", subject_id="someone-else")],
        "other_tenant": [seed(su, "allowed", org=OTHER, subject_id=SUBJECT)],
    }
    assert memory(su, made["pending"][0])["status"] == "pending_approval"  # type: ignore[index]
    return made


EXPECTED = {"forgotten": 2, "held": 2, "denied": 2, "pending": 1}


def test_each_memory_is_decided_as_a_forget_and_counted(su, writer):
    made = subject_memories(su, writer)
    before = su.execute("SELECT max(decision_id) FROM memgov.decision_log").fetchone()[0] or 0
    assert forget_where(writer, {"subject_id": SUBJECT}) == EXPECTED | {"dry_run": False}

    gone = {kind for kind, ids in made.items() if all(memory(su, m, OTHER if kind == "other_tenant" else ORG) is None
                                                     for m in ids)}  # fmt: skip
    assert gone == {"allowed"}
    # the allowed forgets: one decision-log row lists both memories, one deletion-log row too
    logged = su.execute(
        "SELECT operation, action, memory_id, memory_ids, memory_count, login FROM memgov.decision_log"
        " WHERE decision_id > %s AND action = 'allow'", (before,)
    ).fetchall()  # fmt: skip
    assert logged == [("forget", "allow", None, sorted(made["allowed"]), 2, writer.info.user)]
    deleted = su.execute("SELECT org_id, reason, memory_ids, memory_count FROM memgov.deletion_log").fetchall()
    assert deleted == [(ORG, "forgotten", sorted(made["allowed"]), 2)]
    # the others keep a row each, with their request or quarantine entry; a legal hold names its rule
    rows = su.execute(
        "SELECT memory_id, action, matched_rule_ids FROM memgov.decision_log"
        " WHERE decision_id > %s AND action <> 'allow' ORDER BY decision_id", (before,)
    ).fetchall()  # fmt: skip
    by_memory = {r[0]: (r[1], r[2]) for r in rows}
    assert by_memory == {
        made["legal"][0]: ("deny", ["legal-hold-no-forget"]),
        made["denied"][0]: ("deny", ["block-secrets"]),
        made["held"][0]: ("require_approval", ["hold-uncertain-preferences"]),
        made["quarantined"][0]: ("quarantine", ["quarantine-untrusted-pii"]),
    }
    requests = su.execute("SELECT memory_id FROM memgov.approval_requests WHERE operation = 'forget'").fetchall()
    assert requests == [(made["held"][0],)]
    entries = su.execute("SELECT memory_id FROM memgov.quarantine WHERE operation = 'forget'").fetchall()
    assert entries == [(made["quarantined"][0],)]
    # the sealed log verifies with the shared decision
    su.execute("CALL memgov.run_maintenance()")
    report = su.execute("SELECT memgov.verify_decision_log()").fetchone()[0]
    assert report["ok"] and report["unsealed_rows"] == 0, report


def test_a_dry_run_changes_nothing_and_counts_the_same(su, writer):
    subject_memories(su, writer)
    with unchanged(su, "a dry run"):
        counted = forget_where(writer, {"subject_id": SUBJECT}, dry_run=True)
    assert counted == EXPECTED | {"dry_run": True}
    assert forget_where(writer, {"subject_id": SUBJECT}) == EXPECTED | {"dry_run": False}


def test_the_filter_narrows_by_category_and_creation_time(su, writer):
    old = seed(su, "allowed", subject_id=SUBJECT)
    with su.transaction():  # memgov's own write: created_at is the test's
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute("UPDATE memgov.long_term_memory_items SET created_at = '2020-01-01' WHERE memory_id = %s", (old,))
    new = seed(su, "allowed", subject_id=SUBJECT)
    legal = seed(su, "legal", subject_id=SUBJECT)
    assert forget_where(writer, {"subject_id": SUBJECT, "categories": ["legal_hold"]})["denied"] == 1
    assert forget_where(writer, {"subject_id": SUBJECT, "created_after": "2021-01-01", "categories": ["user_fact"]}) \
        == {"forgotten": 1, "held": 0, "denied": 0, "pending": 0, "dry_run": False}  # fmt: skip
    assert memory(su, new) is None and memory(su, old) is not None and memory(su, legal) is not None
    assert forget_where(writer, {"subject_id": SUBJECT, "created_before": "2021-01-01T00:00:00Z"})["forgotten"] == 1
    assert memory(su, old) is None


def test_a_policy_that_denies_every_forget_deletes_nothing(su, writer):
    start = POLICY.index("rules:\n") + len("rules:\n")
    deny_all = ("  - {{id: no-forgetting, priority: 1, when: [{{field: operation_type, operator: eq, value: forget}}],"
                " action: deny, reason_codes: [NO_FORGET]}}\n")  # fmt: skip
    deploy_policy(su, "2.0.0", text=POLICY[:start] + deny_all + POLICY[start:])
    ids = [seed(su, "allowed", subject_id=SUBJECT) for _ in range(3)]
    assert forget_where(writer, {"subject_id": SUBJECT}) == {"forgotten": 0, "held": 0, "denied": 3, "pending": 0,
                                                            "dry_run": False}  # fmt: skip
    assert all(memory(su, m) is not None for m in ids)
    assert su.execute("SELECT count(*) FROM memgov.deletion_log").fetchone() == (0,)
    rules = su.execute("SELECT DISTINCT matched_rule_ids FROM memgov.decision_log WHERE operation = 'forget'")
    assert rules.fetchall() == [(["no-forgetting"],)]


def test_monitor_mode_forgets_and_logs_what_would_have_been_refused(su, writer):
    deploy_policy(su, "2.0.0", text=POLICY.replace("mode: enforce", "mode: monitor"))
    legal = seed(su, "legal", subject_id=SUBJECT)
    assert forget_where(writer, {"subject_id": SUBJECT})["forgotten"] == 1
    assert memory(su, legal) is None
    logged = su.execute("SELECT action, enforced, memory_id FROM memgov.decision_log WHERE operation = 'forget'")
    assert logged.fetchall() == [("deny", False, legal)]


def test_a_shadowed_tenant_logs_each_forget_with_the_shadows_verdict(su, writer):
    """A shadow records its verdict beside a decision of one memory: each forget keeps its own row."""
    from memgov_pg.compiler import compile_policy
    from memgov_pg.deploy import pg_regex_checker
    from memgov_pg.policy import load_policy

    candidate = load_policy(POLICY.format(version="2.0.0-candidate", description="candidate"),
                            regex_checker=pg_regex_checker(su))  # fmt: skip
    with su.transaction():
        su.execute(compile_policy(candidate, "*").stage_sql())
        su.execute("SELECT memgov.start_shadow('*', '2.0.0-candidate')")
    ids = [seed(su, "allowed", subject_id=SUBJECT) for _ in range(2)] + [seed(su, "legal", subject_id=SUBJECT)]
    assert forget_where(writer, {"subject_id": SUBJECT}) == {"forgotten": 2, "held": 0, "denied": 1, "pending": 0,
                                                            "dry_run": False}  # fmt: skip
    logged = su.execute(
        "SELECT d.memory_id, d.memory_ids, s.candidate_action FROM memgov.decision_log d"
        " JOIN memgov.shadow_decisions s ON s.decision_id = d.decision_id WHERE d.operation = 'forget'"
    ).fetchall()  # fmt: skip
    assert sorted((r[0], r[1], r[2]) for r in logged) == sorted(
        [(m, None, "allow") for m in ids[:2]] + [(ids[2], None, "deny")]
    )
    assert su.execute("SELECT memory_ids FROM memgov.deletion_log").fetchall() == [(sorted(ids[:2]),)]


BAD_FILTERS: dict[str, Any] = {
    "not_an_object": ["subject_id", SUBJECT],
    "a_string": "user-42",
    "empty": {},
    "tenant_only": {"org_id": ORG},
    "categories_only": {"categories": ["user_fact"]},
    "times_only": {"created_before": "2030-01-01"},
    "unknown_key": {"subject_id": SUBJECT, "fact_text": "tea"},
    "misspelt_key": {"subject": SUBJECT},
    "number": {"subject_id": 42},
    "null": {"subject_id": None},
    "empty_string": {"subject_id": ""},
    "categories_not_a_list": {"subject_id": SUBJECT, "categories": "user_fact"},
    "categories_empty": {"subject_id": SUBJECT, "categories": []},
    "categories_of_numbers": {"subject_id": SUBJECT, "categories": [1]},
    "bad_timestamp": {"subject_id": SUBJECT, "created_before": "last tuesday"},
    "timestamp_number": {"subject_id": SUBJECT, "created_after": 1700000000},
    "empty_range": {"subject_id": SUBJECT, "created_after": "2026-02-01", "created_before": "2026-01-01"},
    "bad_tenant": {"subject_id": SUBJECT, "org_id": "acme; DROP TABLE x"},
}


@pytest.mark.parametrize("name", sorted(BAD_FILTERS))
def test_a_malformed_filter_is_refused_and_changes_nothing(su, writer, name):
    subject_memories(su, writer)
    with refused(su, "22023") as info:
        writer.execute("SELECT memgov.forget_where(%s)", (Jsonb(BAD_FILTERS[name]),))
    assert "forget_where" in str(info.value) or "tenant id" in str(info.value)


NULL_CALLS = ["SELECT memgov.forget_where(NULL)", """SELECT memgov.forget_where('{"subject_id": "x"}', NULL)"""]


@pytest.mark.parametrize("call", NULL_CALLS)
def test_null_arguments_are_refused(su, writer, call):
    with refused(su, "22023"):
        writer.execute(call)


# -- tenants ---------------------------------------------------------------------------


def test_a_writer_of_another_tenant_cannot_forget_this_tenants_memories(su, login, logins):
    seed(su, "allowed", subject_id=SUBJECT)
    gwriter = login(logins.gwriter, OTHER)
    with refused(su, "42501"):
        forget_where(gwriter, {"org_id": ORG, "subject_id": SUBJECT})
    with refused(su, "42501"):
        forget_where(gwriter, {"org_id": ORG, "subject_id": SUBJECT}, dry_run=True)
    # in its own tenant it forgets its own memories only
    assert forget_where(gwriter, {"subject_id": SUBJECT})["forgotten"] == 0


@pytest.mark.parametrize("how", ["names_the_tenant", "session_names_it"])
def test_a_bound_writer_cannot_forget_another_tenants_memories(su, login, logins, how):
    theirs = seed(su, "allowed", org=OTHER, subject_id=SUBJECT)
    su.execute("SELECT memgov.grant_tenant(%s, %s)", (logins.bound, ORG))
    conn = login(logins.bound, ORG if how == "names_the_tenant" else OTHER)
    before = snapshot(su)
    with refused(su, "42501"):
        forget_where(conn, {"org_id": OTHER, "subject_id": SUBJECT} if how == "names_the_tenant"
                     else {"subject_id": SUBJECT})  # fmt: skip
    assert memory(su, theirs, OTHER) is not None
    assert snapshot(su) == before


def test_a_login_without_a_memgov_role_cannot_call_it(su, login, logins):
    seed(su, "allowed", subject_id=SUBJECT)
    with refused(su, "42501"):
        forget_where(login(logins.nobody), {"subject_id": SUBJECT})


def test_an_admin_forgets_in_the_tenant_it_names(su, login, logins):
    mine = seed(su, "allowed", subject_id=SUBJECT)
    theirs = seed(su, "allowed", org=OTHER, subject_id=SUBJECT)
    admin = login(logins.admin, None)
    assert forget_where(admin, {"org_id": OTHER, "subject_id": SUBJECT})["forgotten"] == 1
    assert memory(su, theirs, OTHER) is None and memory(su, mine) is not None
    with refused(su, "22023"):  # no tenant named, none in the session
        forget_where(admin, {"subject_id": SUBJECT})


# -- the engine ------------------------------------------------------------------------


def test_the_engine_forgets_in_its_tenant(su, memgov_dsn, login, logins):
    subject_memories(su, login(logins.writer))
    with SyncMemoryPolicyEngine.connect(login_dsn(memgov_dsn, logins.writer), org_id=ORG, max_size=1) as engine:
        assert engine.forget_where({"subject_id": SUBJECT}, dry_run=True) == EXPECTED | {"dry_run": True}
        with pytest.raises(SQLError) as info:
            engine.forget_where({"categories": ["user_fact"]})
        assert info.value.sqlstate == "22023"
        assert engine.forget_where({"subject_id": SUBJECT}) == EXPECTED | {"dry_run": False}


def test_the_async_engine_forgets_in_its_tenant(su, memgov_dsn, login, logins):
    subject_memories(su, login(logins.writer))

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with await MemoryPolicyEngine.connect(login_dsn(memgov_dsn, logins.writer), org_id=ORG) as engine:
            return (await engine.forget_where({"subject_id": SUBJECT}, dry_run=True),
                    await engine.forget_where({"subject_id": SUBJECT}))  # fmt: skip

    assert asyncio.run(scenario()) == (EXPECTED | {"dry_run": True}, EXPECTED | {"dry_run": False})


# -- the command line --------------------------------------------------------------------


@pytest.mark.slow
def test_cli_forget_dry_run_then_forget(su, memgov_dsn, login, logins):
    subject_memories(su, login(logins.writer))
    dsn = login_dsn(memgov_dsn, logins.writer)
    with unchanged(su, "memgov forget --dry-run"):
        dry = run_memgov("forget", "--tenant", ORG, "--subject", SUBJECT, "--dry-run", "--json", "--dsn", dsn)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout) == {"org_id": ORG, "filter": {"subject_id": SUBJECT}} | EXPECTED | {"dry_run": True}
    done = run_memgov("forget", "--tenant", ORG, "--subject", SUBJECT, "--dsn", dsn)
    assert done.returncode == 0, done.stderr
    assert "forgotten" in done.stdout and " 2 " in done.stdout
    assert su.execute("SELECT reason, memory_count FROM memgov.deletion_log").fetchall() == [("forgotten", 2)]


@pytest.mark.slow
def test_cli_forget_refuses_bad_input_in_one_line(su, memgov_dsn, logins):
    seed(su, "allowed", subject_id=SUBJECT)
    dsn = login_dsn(memgov_dsn, logins.writer)
    with unchanged(su, "memgov forget with bad input"):
        no_scope = run_memgov("forget", "--tenant", ORG, "--category", "user_fact", "--dsn", dsn)
        assert_one_line_error(no_scope, "--subject")
        assert no_scope.returncode == 2
        bad_tenant = run_memgov("forget", "--tenant", "no such;tenant", "--subject", SUBJECT, "--dsn", dsn)
        assert bad_tenant.returncode == 2 and "Traceback" not in bad_tenant.stderr
        bad_time = run_memgov("forget", "--tenant", ORG, "--subject", SUBJECT, "--created-before", "soon",
                              "--dsn", dsn)  # fmt: skip
        assert_one_line_error(bad_time, "created_before", "22023")
        assert bad_time.returncode == 1
        other = run_memgov("forget", "--tenant", OTHER, "--subject", SUBJECT, "--dsn",
                           login_dsn(memgov_dsn, logins.nobody))  # fmt: skip
        assert_one_line_error(other, "memgov_writer")
        assert other.returncode == 1
        su.execute("SELECT memgov.grant_tenant(%s, %s)", (logins.bound, OTHER))
        unbound = run_memgov("forget", "--tenant", ORG, "--subject", SUBJECT, "--json", "--dsn",
                             login_dsn(memgov_dsn, logins.bound))  # fmt: skip
        assert_one_line_error(unbound, "not bound to tenant acme", "42501")
        assert unbound.returncode == 1 and unbound.stdout == ""
        su.execute("SELECT memgov.revoke_tenant(%s, %s)", (logins.bound, OTHER))
